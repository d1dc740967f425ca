"""Tokenizer, packing, corpus generation and data locations (no tfds build here)."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from pipecheck.data import demo_text, tokenizer
from pipecheck.workloads.demo import VOCAB_SIZE


def test_vocabulary_matches_the_demo_model():
    assert tokenizer.VOCAB_SIZE == VOCAB_SIZE == 260


def test_encode_normalizes_and_adds_bos_eos():
    assert tokenizer.encode("a  b\n\n") == [1, ord("a") + 4, ord(" ") + 4, ord("b") + 4, 2]
    # NFKC: the ligature "ﬁ" becomes "fi"; bytes input is decoded as UTF-8 first.
    assert tokenizer.encode("ﬁ".encode()) == [1, ord("f") + 4, ord("i") + 4, 2]
    ids = tokenizer.encode("café")
    assert max(ids) < VOCAB_SIZE and tokenizer.decode(ids) == "café"


def test_pack_truncates_and_pads():
    assert tokenizer.pack([1, 5, 6, 2], 6).tolist() == [1, 5, 6, 2, 0, 0]
    assert tokenizer.pack([1, 5, 6, 7, 8, 2], 3).tolist() == [1, 5, 6]
    assert tokenizer.pack([1, 2], 4).dtype == np.int32


def test_tokenize_and_pack_on_records():
    f = tokenizer.TokenizeAndPack(8)
    out = f({"text": b"hello world"})
    assert out["tokens"].shape == (8,) and out["tokens"].dtype == np.int32
    assert tokenizer.decode(out["tokens"]) == "hello w"
    assert (f(b"hi")["tokens"] == f({"text": "hi"})["tokens"]).all()
    with pytest.raises(KeyError, match="text_key"):
        f({"body": b"x"})


def test_documents_are_deterministic_and_shaped_like_text():
    a = list(demo_text.generate_documents(50, seed=3))
    b = list(demo_text.generate_documents(50, seed=3))
    c = list(demo_text.generate_documents(50, seed=4))
    assert a == b and a != c
    lengths = [len(d.split()) for d in a]
    lo, hi = demo_text.DOC_WORDS_RANGE
    assert min(lengths) >= lo and max(lengths) <= hi
    assert all(d[0].isupper() or d[0].isdigit() or not d[0].isascii() for d in a)
    assert all(d.endswith(".") for d in a)


def test_documents_are_those_drawn_with_rng_choice():
    # the corpus as Generator.choice(VOCAB_WORDS, size=n, p=...) drew its words (a cdf
    # computed per document): 200 documents, hashed with that code; a cached corpus stays valid
    docs = list(demo_text.generate_documents(200, seed=0))
    digest = hashlib.sha1("\x00".join(docs).encode()).hexdigest()
    assert digest == "13cc81f7ed75e42045dfefbc07f18be88cec2f29"


def test_data_root_precedence(monkeypatch, tmp_path):
    monkeypatch.setenv("PIPECHECK_DATA_DIR", str(tmp_path / "env"))
    assert demo_text.data_root("") == tmp_path / "env"
    assert demo_text.data_root(str(tmp_path / "key")) == tmp_path / "key"
    monkeypatch.delenv("PIPECHECK_DATA_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert demo_text.data_root("") == tmp_path / "cache" / "pipecheck"
    assert demo_text.corpus_dir(4000, 0, str(tmp_path)) == tmp_path / "demo_text" / "n4000-s0"


def test_an_empty_directory_is_not_a_complete_corpus(tmp_path):
    assert not demo_text.is_complete(tmp_path)
