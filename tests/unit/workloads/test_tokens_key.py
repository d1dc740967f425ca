"""Which batch entry tokens/s counts: named in the config, else found by name or shape."""

from __future__ import annotations

import numpy as np
import pytest

from pipecheck.errors import ConfigError
from pipecheck.workloads.base import tokens_key_of


def ids(batch: int = 8, seq: int = 32) -> np.ndarray:
    return np.zeros((batch, seq), np.int32)


def test_a_maxtext_batch_counts_its_inputs():
    batch = {"inputs_segmentation": ids(), "inputs_position": ids(), "inputs": ids(),
             "targets": ids(), "targets_segmentation": ids()}
    assert tokens_key_of(batch) == "inputs"


def test_tokens_then_input_ids_then_the_first_integer_batch_by_seq_entry():
    assert tokens_key_of({"inputs": ids(), "tokens": ids()}) == "tokens"
    assert tokens_key_of({"mask": ids(), "input_ids": ids()}) == "input_ids"
    assert tokens_key_of({"x": np.zeros((8, 32), np.float32), "ids": ids()}) == "ids"
    assert tokens_key_of({"x": np.zeros((8, 4), np.float32), "y": np.zeros(8, np.int32)}) \
        is None
    assert tokens_key_of({"label": ids(seq=1)}) is None  # [batch, 1]: a label, not a sequence


def test_the_config_names_it_or_gets_a_one_line_error():
    assert tokens_key_of({"inputs": ids(), "src": ids()}, "src") == "src"
    with pytest.raises(ConfigError, match="tokens_key 'tok' is not a batch entry; the batch "
                                          "has 'inputs', 'src'"):
        tokens_key_of({"inputs": ids(), "src": ids()}, "tok")
