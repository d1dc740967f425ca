"""The bulk read of step lines (``shaped.read_shaped``: every line of a shape read as
integers at once) gives what the pattern read gives (``by_pattern.read_by_pattern``: each
tail parsed by its keys, each header by the absl pattern), on the shapes real MaxText logs
print and on the ones it must refuse."""

from __future__ import annotations

import math
import pathlib

import numpy as np
import pytest

from pipecheck.logs.maxtext import by_pattern, shaped, steps
from pipecheck.logs.maxtext.columns import StepColumns
from pipecheck.logs.maxtext.patterns import STEP_MARK

REAL = pathlib.Path(__file__).resolve().parents[2] / "data" / "real"

HEADED = ("I0312 09:15:{s:09.6f} 140233681626944 metric_logger.py:181] completed step: {n}, "
          "seconds: {t:.3f}, TFLOP/s/device: {f:.3f}, Tokens/s/device: {k:.3f}, "
          "total_weights: {w}, loss: {loss:.3f}")


def _same(a: StepColumns, b: StepColumns) -> None:
    """Two reads of the same lines agree on every number, flag, time and clock."""
    np.testing.assert_array_equal(a.number, b.number)
    np.testing.assert_array_equal(a.has_loss, b.has_loss)
    np.testing.assert_array_equal(a.own, b.own)
    np.testing.assert_array_equal(a.day[a.own], b.day[b.own])
    np.testing.assert_array_equal(a.secs[a.own], b.secs[b.own])
    assert [a.clock(k) for k in np.flatnonzero(a.own)] == [
        b.clock(k) for k in np.flatnonzero(b.own)]
    for mine, theirs in ((a.cols, b.cols), (a.metrics, b.metrics)):
        assert mine.keys() == theirs.keys()
        for key in mine:
            np.testing.assert_array_equal(mine[key], theirs[key], err_msg=key)


def _lines(n: int, seed: int = 0, fmt: str = HEADED) -> list[str]:
    rng = np.random.default_rng(seed)
    return [fmt.format(s=float(rng.uniform(0, 59.999999)), n=i, t=float(rng.uniform(0, 50)),
                       f=float(rng.uniform(0, 3000)), k=float(rng.uniform(0, 2e5)),
                       w=int(rng.integers(1, 2_000_000)), loss=float(rng.uniform(0, 12)))
            for i in range(n)]


def _bulk(lines: list[str]) -> StepColumns | None:
    data = ("\n".join(lines) + "\n").encode()
    return shaped.read_shaped(data, lines[0], len(lines))


def test_absl_step_lines_are_read_in_bulk_as_the_pattern_reads_them():
    lines = _lines(3000)
    got = _bulk(lines)
    assert got is not None  # the bulk read took them
    _same(got, by_pattern.read_by_pattern(lines))
    assert got.cols["time_s"][:3].tolist() == [float(x.split("seconds: ")[1].split(",")[0])
                                                for x in lines[:3]]


@pytest.mark.parametrize("fmt", [
    # bare lines, as MaxText's docs and older generations print them
    "completed step: {n}, seconds: {t:.3f}, TFLOP/s/device: {f:.3f}, loss: {loss:.3f}",
    # a prefix before the header (a script's comment, a pod name)
    "# I0312 09:15:{s:09.6f} 140233681626944 train.py:512] completed step: {n}, "
    "seconds: {t:.3f}, loss: {loss:.3f}",
    "worker0 I1231 23:59:{s:09.6f} 7 train.py:1] completed step: {n}, seconds: {t:.3f}",
    # exponents, integers and a repeated key (the first counts)
    "completed step: {n}, seconds: {t:.3f}, learning_rate: {f:.3e}, total_weights: {w}, "
    "seconds: 9.5",
    # signs
    "completed step: {n}, seconds: {t:.4f}, reward_margin: -{loss:.2f}",
    # a header time without a fraction
    "I0312 09:15:{w:02d} 1 train.py:1] completed step: {n}, seconds: {t:.3f}",
])
def test_other_shapes_read_in_bulk_agree_with_the_pattern_read(fmt):
    lines = _lines(500, seed=1, fmt=fmt.replace("{w:02d}", "{n:02d}") if "{w:02d}" in fmt
                   else fmt)
    lines = lines[:60] if "{w:02d}" in fmt else lines
    got = _bulk(lines)
    assert got is not None
    _same(got, by_pattern.read_by_pattern(lines))


@pytest.mark.parametrize("odd", [
    "completed step: 7, seconds: nan, loss: 1.000",        # a value numpy reads, not this read
    "completed step: 7, seconds: 1.5, loss: inf",
    "completed step: -7, seconds: 1.500, loss: 1.000",     # a step number is never negative
    "completed step: 7, seconds: 1.500, x-y: 2, loss: 1.000",  # a sign that is not a number's
    "completed step: 7.5, seconds: 1.500, loss: 1.000",
    "completed step: 7, seconds: 123456789012345678901, loss: 1.000",  # past 2**53
])
def test_a_shape_the_bulk_read_does_not_take_is_left_to_the_pattern_read(odd):
    assert _bulk([odd, odd]) is None


def test_a_line_whose_decimals_differ_from_its_shape_sends_the_shape_to_the_pattern_read():
    lines = ["completed step: 1, seconds: 0.520, loss: 2.000",
             "completed step: 2, seconds: 0.52, loss: 2.000"]
    assert _bulk(lines) is None
    lines = ["completed step: 1, seconds: 0.52, loss: 2.000",
             "completed step: 2, seconds: 0.520, loss: 2.000"]
    assert _bulk(lines) is None
    # a step line without its number shifts every number after it: the count tells
    assert _bulk(["completed step: 1, seconds: 0.5, total_weights: 3",
                  "completed step: 2, seconds: 0.5, total_weights: "]) is None


def test_a_block_of_mixed_shapes_reads_each_shape_and_agrees_with_the_pattern_read():
    rng = np.random.default_rng(5)
    pool = (_lines(200, 2) + _lines(200, 3, "completed step: {n}, seconds: {t:.3f}")
            + _lines(200, 4, "completed step: {n}, seconds: {t:.2f}, loss: {loss:.3f}")
            + ["completed step: 9, seconds: nan, loss: nan",
               "completed step: 10, seconds: 1.0, loss: 2.0, extra",
               "I0312 09:15:50.1 1 x.py:1] completed step: 11, seconds: 0.1, loss: -0.0"])
    lines = [pool[k] for k in rng.permutation(len(pool))]
    _same(steps.read_steps(lines), by_pattern.read_by_pattern(lines))


def test_every_real_log_reads_the_same_in_bulk_and_by_pattern():
    """The real logs' step lines, block by block as ``parse_lines`` hands them over."""
    checked = 0
    for path in sorted(REAL.glob("*.log")):
        lines = [ln for ln in path.read_text(encoding="utf-8", errors="replace").splitlines()
                 if STEP_MARK in ln]
        if not lines:
            continue
        _same(steps.read_steps(lines), by_pattern.read_by_pattern(lines))
        checked += 1
    assert checked >= 8


def test_the_clock_is_written_back_as_the_header_shows_it():
    lines = ["I0312 09:05:07.000100 1 a.py:1] completed step: 1, seconds: 1.0",
             "I0312 23:59:59.999999 1 a.py:1] completed step: 2, seconds: 1.0"]
    got = _bulk(lines)
    assert got is not None
    assert [got.clock(0), got.clock(1)] == ["09:05:07.000100", "23:59:59.999999"]
    assert got.secs.tolist() == [9 * 3600 + 5 * 60 + 7.0001, 86399.999999]
    assert math.isclose(got.day[1] - got.day[0], 0)


def _same_signs(a: StepColumns, b: StepColumns) -> None:
    """``_same``, and every value's sign too (a negative zero is not a zero)."""
    _same(a, b)
    for mine, theirs in ((a.cols, b.cols), (a.metrics, b.metrics)):
        for key in mine:
            np.testing.assert_array_equal(np.signbit(mine[key]), np.signbit(theirs[key]))


@pytest.mark.parametrize("lines", [
    # a negative zero keeps its sign, as float() reads "-0.000"
    ["completed step: 1, seconds: 0.500, loss: -0.000",
     "completed step: 2, seconds: 0.500, loss: -0.250"],
    # one value under two keys (MaxText's older TFLOP/s key and the newer): the first counts
    ["completed step: 1, seconds: 0.5, TFLOP/s: 1.5, TFLOP/s/device: 2.5",
     "completed step: 2, seconds: 0.5, TFLOP/s: 1.6, TFLOP/s/device: 2.6"],
    # no seconds: no readable step, whichever read takes it
    ["completed step: 1, loss: 2.0", "completed step: 2, loss: 3.0"],
    # a signed step number is no step number
    ["completed step: -0, seconds: 0.5", "completed step: -0, seconds: 0.6"],
    # a first line whose header is not one (a one-digit hour) before real ones of its shape
    ["I0101 1:00:00.000000 1 x.py:1] completed step: 1, seconds: 0.5",
     "I0101 10:00:00.000000 1 x.py:1] completed step: 2, seconds: 0.5"],
    # header dates and times that cannot be: read as no header
    ["I1301 10:00:00.000000 1 x.py:1] completed step: 1, seconds: 0.5",
     "I0132 10:00:00.000000 1 x.py:1] completed step: 2, seconds: 0.5",
     "I0101 24:00:00.000000 1 x.py:1] completed step: 3, seconds: 0.5",
     "I0101 10:60:00.000000 1 x.py:1] completed step: 4, seconds: 0.5",
     "I0101 10:00:60.500000 1 x.py:1] completed step: 5, seconds: 0.5",
     "I0100 10:00:00.000000 1 x.py:1] completed step: 6, seconds: 0.5"],
    # a blank float() does not take before a value (str.isspace counts it)
    ["completed step: 1, seconds: 0.5, perplexity: \x1f1.607",
     "completed step: 2, seconds: 0.5, perplexity: \x1f1.703"],
    # keys told apart by a digit alone, which the shape does not keep
    ["completed step: 1, l1: 5.0, seconds: 1.0", "completed step: 2, l2: 2.0, seconds: 9.0"],
    ["completed step: 1, 7seconds: 5.0, seconds: 1.0",
     "completed step: 2, seconds: 2.0, seconds: 9.0"],
    # a value with fewer decimals than the first line's, last on its line, before a line
    # that starts with digits (a `srun -l` label)
    ["2: completed step: 2, seconds: 1.000, loss: 4.125",
     "1: completed step: 1, seconds: 1.000, loss: 4.3",
     "3: completed step: 3, seconds: 1.000, loss: 4.250"],
    # days their month does not have
    ["I0230 10:00:00.000000 1 x.py:1] completed step: 1, seconds: 0.5",
     "I0431 10:00:00.000000 1 x.py:1] completed step: 2, seconds: 0.5",
     "I0229 10:00:00.000000 1 x.py:1] completed step: 3, seconds: 0.5"],
], ids=["negative-zero", "two-tflops-keys", "no-seconds", "signed-step", "one-digit-hour",
        "impossible-headers", "unit-separator", "keys-by-digit", "key-with-digit",
        "decimals-run-on", "days-of-month"])
def test_edge_values_read_alike_whichever_read_takes_the_lines(lines):
    """Which read takes a line depends on the lines it is grouped with (its block's, its
    shape's), so each must give what the other gives, together and one at a time."""
    each_alone = StepColumns.join([by_pattern.read_by_pattern([line]) for line in lines])
    _same_signs(steps.read_steps(lines), each_alone)
    _same_signs(by_pattern.read_by_pattern(lines), each_alone)
    for line in lines:
        alone = by_pattern.read_by_pattern([line])  # a line read on its own, twice over
        twice = StepColumns.join([alone, alone])
        _same_signs(steps.read_steps([line, line]), twice)
        _same_signs(by_pattern.read_by_pattern([line, line]), twice)


def test_a_header_on_a_day_its_month_does_not_have_is_no_header():
    lines = ["I0230 10:00:00.000000 1 x.py:1] completed step: 1, seconds: 0.5",
             "I0431 10:00:00.000000 1 x.py:1] completed step: 2, seconds: 0.5",
             "I0229 10:00:00.000000 1 x.py:1] completed step: 3, seconds: 0.5"]
    for read in (steps.read_steps(lines), by_pattern.read_by_pattern(lines)):
        assert read.own.tolist() == [False, False, True]  # 29 February: a leap year's day
