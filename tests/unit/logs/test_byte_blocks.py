"""A log file read as bytes, a block at a time (``reader.Reader.read_block``: a block of
one step line shape taken apart without splitting its step lines, any other block decoded
and split), gives the ``ParsedLog`` its decoded lines give (``parse_lines``), whatever the
block size: logs mixing step line shapes, other lines, line breaks other than ``\\n``,
non-ASCII and undecodable bytes, step marks inside other text, bare step lines and no
final line end; real logs; a generated log with its checkpoints."""

from __future__ import annotations

import pathlib
import random

import numpy as np
import pytest

from pipecheck.logs import maxtext
from pipecheck.logs.maxtext import blocks, reader
from tests.maxtext_log import write_log
from tests.unit.logs.test_halves import LOGS, _one_pass, _same

BLOCK_SIZES = (64, 333, 4096)
"""Bytes a block: shorter than a line, a few lines, many lines."""


def _bytes_read(path: pathlib.Path) -> maxtext.ParsedLog:
    return maxtext.parse_file(path, min_bytes=1 << 60)  # one pass, never in halves


def _step(k: int, rng: random.Random) -> str:
    t = f"10:{k // 60 % 60:02d}:{k % 60:02d}.{rng.randrange(10 ** 6):06d}"
    seconds = f"{rng.uniform(0.4, 0.6):.3f}"
    return rng.choice([
        f"I0101 {t} 140 metric_logger.py:181] completed step: {k}, seconds: {seconds}, "
        f"TFLOP/s/device: {rng.uniform(30, 41):.3f}, loss: {rng.uniform(2, 10):.3f}",
        f"I0101 {t} 140 metric_logger.py:181] completed step: {k}, seconds: {seconds}, "
        f"TFLOP/s/device: {rng.uniform(30, 41):.3f}, loss: {rng.uniform(2, 10):.3f}",
        f"I0101 {t} 140 metric_logger.py:181] completed step: {k}, seconds: {seconds}, "
        f"loss: {rng.uniform(2, 10):.3f}, learning_rate: {rng.choice(['2.9e-05', '0.0003'])}",
        f"completed step: {k}, seconds: {seconds}, loss: {rng.uniform(2, 10):.3f}",
        f"pod-0 I0101 {t} 140 train.py:9] completed step: {k}, seconds: {seconds}",
    ])


OTHERS = [
    "I0101 10:00:00.100000 140 train.py:1] number parameters: 1.100 billion",
    "I0101 10:00:00.200000 140 train.py:1] Per train step:",
    " Total TFLOPs: 21.09 ",
    "I0101 10:00:00.400000 140 pyconfig.py:1] Config param steps: 9",
    "I0101 10:00:01.400000 140 checkpointing.py:1] Saving checkpoint at step 1",
    "I0101 10:00:01.500000 141 async_checkpointer.py:77] Background save thread done. "
    "Time taken: 12.5s",
    "W0101 10:00:01.600000 140 train.py:1] the 'completed step:' line is late",
    "I0101 10:00:01.700000 140 train.py:1] completed profiler activation/deactivation step: 7",
    "",
    "W0101 10:00:01.800000 140 train.py:1] 12 \u00b5s per step, caf\u00e9",
    "page\x0cbreak and a \x1c separator",
    "a line\rwith a carriage return",
    "I0101 10:00:01.900000 140 max_utils.py:1] \tUsing (GB) 0.70 / 31.25 (2.2%) on TPU_0",
]


def _mixed_log(seed: int, steps: int = 120) -> bytes:
    """Step lines, mostly of one shape, with other lines among them; some ending in
    ``\\r\\n``, one undecodable byte, and no line end after the last line half the time."""
    rng = random.Random(seed)
    lines = []
    for k in range(steps):
        lines.append(_step(k, rng) if rng.random() < 0.3 else _step(k, random.Random(0)))
        if rng.random() < 0.08:
            lines.append(rng.choice(OTHERS))
    text = "".join(line + rng.choice(["\n"] * 20 + ["\r\n"]) for line in lines)
    data = text.encode()
    if rng.random() < 0.3:
        at = rng.randrange(len(data))
        data = data[:at] + b"\xff" + data[at:]
    return data.rstrip(b"\n") if rng.random() < 0.5 else data


@pytest.mark.parametrize("block", BLOCK_SIZES)
@pytest.mark.parametrize("seed", range(12))
def test_a_mixed_log_read_in_byte_blocks_reads_as_its_decoded_lines(
        tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, seed: int, block: int) -> None:
    log = tmp_path / "mixed.log"
    log.write_bytes(_mixed_log(seed))
    whole = _one_pass(log)
    monkeypatch.setattr(blocks, "READ_BLOCK_CHARS", block)
    _same(whole, _bytes_read(log), f"seed {seed}, blocks of {block}")


@pytest.mark.parametrize("log", LOGS, ids=lambda p: p.name)
def test_a_real_log_read_in_byte_blocks_reads_as_its_decoded_lines(
        log: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    whole = _one_pass(log)
    _same(whole, _bytes_read(log), log.name)
    for block in BLOCK_SIZES:
        monkeypatch.setattr(blocks, "READ_BLOCK_CHARS", block)
        _same(whole, _bytes_read(log), f"{log.name}, blocks of {block}")


def test_a_generated_log_is_read_without_splitting_its_step_lines(
        tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A block of step lines and checkpoint lines is taken apart whole: the step lines
    read as one text, the others each on its own; the result as from its decoded lines."""
    log = tmp_path / "g.log"
    write_log(log, 5000, seed=4, checkpoint_every=100)
    taken_apart = []
    split_block = blocks.split_block

    def spy(block: bytes) -> blocks.SplitBlock | None:
        got = split_block(block)
        taken_apart.append(got is not None)
        return got

    monkeypatch.setattr(reader, "split_block", spy)
    monkeypatch.setattr(blocks, "READ_BLOCK_CHARS", 1 << 16)
    _same(_one_pass(log), _bytes_read(log), "generated")
    assert len(taken_apart) > 10 and sum(taken_apart) >= len(taken_apart) - 2


def test_a_block_is_taken_apart_into_its_step_lines_and_its_other_lines() -> None:
    steps = [f"I0101 10:00:{k:02d}.000000 140 train.py:9] completed step: {k}, seconds: "
             f"0.5{k % 10}0, loss: {k % 10}.500" for k in range(24)]
    others = ["I0101 10:00:03.500000 140 checkpointing.py:1] Saving checkpoint at step 3",
              "", "Per train step:"]
    lines = steps[:3] + others[:1] + steps[3:7] + others[1:] + steps[7:]
    got = blocks.split_block(("\n".join(lines) + "\n").encode())
    assert got is not None
    assert got.lines == len(lines) and got.sample == steps[0]
    np.testing.assert_array_equal(got.step_at, [0, 1, 2, 4, 5, 6, 7, *range(10, 27)])
    assert got.others == [(3, others[0]), (8, ""), (9, "Per train step:")]
    assert got.steps == ("\n".join(steps) + "\n").encode()
    uniform = ("\n".join(steps) + "\n").encode()
    assert blocks.split_block(uniform).steps == uniform
    # more other lines than SPLIT_MAX_OTHER_SHARE of them: split line by line
    crowded = steps[:8] + others * 3
    assert blocks.split_block(("\n".join(crowded) + "\n").encode()) is None


@pytest.mark.parametrize("change", [
    lambda b: b.replace(b"\n", b"\r\n"),  # a line break that is not \n alone
    lambda b: b.replace(b"Saving", b"Sa\x0cving"),
    lambda b: b.replace(b", loss", b",\rloss"),  # ... in every step line
    lambda b: b.replace(b"Saving", b"Sa\xc2\xb5ving"),  # not ASCII
    lambda b: b[:-1],  # the last line not ended
    lambda b: b.replace(b"loss: 5.500", b"loss: 5.5e+00"),  # a step line of another shape
    lambda b: b.replace(b"loss: 5.500", b"lost: 5.500"),  # ... as long as the first's
    lambda b: b.replace(b"Saving checkpoint", b"completed step: 9"),  # ... made of another
], ids=["crlf", "form-feed", "cr-in-step-lines", "non-ascii", "unended", "other-shape",
        "same-length-shape", "mark-elsewhere"])
def test_a_block_that_needs_its_lines_split_is_not_taken_apart(change) -> None:
    lines = [f"I0101 10:00:0{k}.000000 140 train.py:9] completed step: {k}, seconds: "
             f"0.5{k}0, loss: {k}.500" for k in range(10)]
    lines.insert(4, "I0101 10:00:03.500000 140 checkpointing.py:1] Saving checkpoint at step 3")
    block = ("\n".join(lines) + "\n").encode()
    assert blocks.split_block(block) is not None
    assert blocks.split_block(change(block)) is None


@pytest.mark.parametrize("text", [
    # a log cut in the middle of its last number (copied while the run writes it)
    "completed step: 1, seconds: 0.512\ncompleted step: 2, seconds: 0.",
    "completed step: 1, seconds: 0.512\ncompleted step: 2, seconds: 0.\n",
    # a line of a step line's shape without its mark (a digit inside it): not a step
    "completed step: 12, seconds: 0.5\ncomplete1d step: , seconds: 0.7\n"
    "completed step: 13, seconds: 0.5\n",
    # an absl header whose date cannot be one, on another line and on a step line
    "I1301 10:00:00.000000 1 pyconfig.py:1] Config param steps: 9\n"
    "I0101 10:00:01.000000 1 x.py:1] completed step: 1, seconds: 0.5\n"
    "I0132 10:00:02.000000 1 x.py:1] completed step: 2, seconds: 0.5\n",
], ids=["cut-in-a-number", "cut-then-ended", "mark-with-a-digit", "impossible-dates"])
def test_odd_logs_read_as_their_decoded_lines(tmp_path: pathlib.Path,
                                              monkeypatch: pytest.MonkeyPatch,
                                              text: str) -> None:
    log = tmp_path / "odd.log"
    log.write_text(text)
    whole = _one_pass(log)
    assert len(whole.steps) == 2 or "Config" in text
    for block in (*BLOCK_SIZES, 1 << 22):
        monkeypatch.setattr(blocks, "READ_BLOCK_CHARS", block)
        _same(whole, _bytes_read(log), f"blocks of {block}")
