"""Slow samples: a few elements of the pipeline's expensive stage costing many times the rest.

Each batch waits for its elements: a worker builds a batch element by element, so a batch
that holds a heavy element (a long document to tokenize, a large image to decode) takes
its cost on top of the light ones'. When a few percent of elements cost 10-50x the median,
the loader's time per batch is set by them, not by the typical element.

From the per-element costs of the stage (timed by ``measure.element_cost``, apart from the
timed batches), ``slow_samples`` gives the median, p99 and max cost, the share of heavy
elements (``HEAVY_RATIO`` times the median or more), how much they inflate the stage's
time over even costs at the median (mean over median), and the batch times they predict:
batches of ``per_batch`` elements drawn from the costs (seeded resampling), their median
and p90, against the measured batch times. The finding (``slow_samples_finding``) is
given only when it matters: the heavy tail inflates the stage by ``MIN_INFLATION`` or more,
at least ``MIN_HEAVY`` elements were heavy (one slow element is not a tail), and the tail
adds ``MIN_BATCH_SHARE`` or more of a measured batch's time to each batch.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import numpy as np

from pipecheck.records.common import Finding
from pipecheck.units import ms

HEAVY_RATIO = 5.0
"""An element costing at least this many times the median is heavy: far beyond the
spread of even work on a busy machine (2-3x), the range users report as 10-50x."""

MIN_INFLATION = 1.25
"""The heavy tail matters when it makes the stage at least this much slower than even
costs at the median would (mean over median): a quarter more loader time per batch."""

MIN_HEAVY = 2
"""Fewest heavy elements that make a tail (one is a one-off)."""

MIN_BATCH_SHARE = 0.1
"""The tail must add at least this share of a measured batch time to each batch (its
elements' mean cost over the median, times the elements per batch): a tail in a stage that
is a small part of the batch's time is not what holds the loader back."""

RESAMPLED_BATCHES = 2000
"""Batches drawn from the costs to predict the batch-time distribution."""

RESAMPLE_SEED = 0
"""The resampling's seed: the same costs always predict the same batch times."""


@dataclasses.dataclass(frozen=True)
class SlowSamples:
    """What the per-element costs of one stage say about batch times."""

    stage: str
    n: int
    median_s: float
    p99_s: float
    max_s: float
    mean_s: float
    heavy: int
    """Elements costing ``HEAVY_RATIO`` x the median or more."""
    per_batch: int
    batches_with_heavy: float
    """Share of batches of ``per_batch`` elements expected to hold a heavy one."""
    predicted_median_s: float
    """Median cost of a batch's elements of this stage (resampled batches, summed)."""
    predicted_p90_s: float
    measured_median_s: float
    measured_p90_s: float

    @property
    def inflation(self) -> float:
        """The stage's time over what even costs at the median would take."""
        return self.mean_s / self.median_s if self.median_s > 0 else float("nan")

    @property
    def tail_per_batch_s(self) -> float:
        """Seconds the tail adds to a batch: its elements' mean cost over the median."""
        return self.per_batch * (self.mean_s - self.median_s)

    @property
    def heavy_share(self) -> float:
        return self.heavy / self.n if self.n else 0.0


def slow_samples(stage: str, costs: Sequence[float], per_batch: int,
                 batch_times: Sequence[float]) -> SlowSamples | None:
    """The distribution of ``costs`` (seconds per element of ``stage``) and the batch times
    it predicts beside the measured ``batch_times``; None without costs."""
    c = np.asarray(costs, dtype=float)
    if c.size == 0:
        return None
    med = float(np.median(c))
    heavy = int(np.count_nonzero(c >= HEAVY_RATIO * med)) if med > 0 else 0
    b = max(1, per_batch)
    rng = np.random.default_rng(RESAMPLE_SEED)
    sums = c[rng.integers(0, c.size, (RESAMPLED_BATCHES, b))].sum(axis=1)
    measured = np.asarray(batch_times, dtype=float)
    share = heavy / c.size
    return SlowSamples(
        stage=stage, n=int(c.size), median_s=med, p99_s=float(np.quantile(c, 0.99)),
        max_s=float(c.max()), mean_s=float(c.mean()), heavy=heavy, per_batch=b,
        batches_with_heavy=1.0 - (1.0 - share) ** b,
        predicted_median_s=float(np.median(sums)),
        predicted_p90_s=float(np.quantile(sums, 0.9)),
        measured_median_s=float(np.median(measured)) if measured.size else float("nan"),
        measured_p90_s=float(np.quantile(measured, 0.9)) if measured.size else float("nan"))


def matters(s: SlowSamples) -> bool:
    """Whether the heavy tail is worth a finding (``MIN_INFLATION``, ``MIN_HEAVY``, and
    ``MIN_BATCH_SHARE`` of the measured batch time when batches were measured)."""
    batch = s.measured_median_s
    share_ok = not batch > 0 or s.tail_per_batch_s >= MIN_BATCH_SHARE * batch
    return s.heavy >= MIN_HEAVY and s.inflation >= MIN_INFLATION and share_ok


def slow_samples_finding(s: SlowSamples) -> Finding | None:
    """The ``slow-samples`` finding when the tail matters, else None."""
    if not matters(s):
        return None
    return Finding(
        kind="slow-samples",
        message=(f"per element median {ms(s.median_s)}, p99 {ms(s.p99_s)}, max "
                 f"{ms(s.max_s)} ({s.n} elements timed); {100 * s.heavy_share:.0f}% cost "
                 f"{HEAVY_RATIO:g}x the median or more and make the stage {s.inflation:.2f}x "
                 f"slower than even costs would; {100 * s.batches_with_heavy:.0f}% of batches "
                 f"of {s.per_batch} hold one, so each batch's elements cost median "
                 f"{ms(s.predicted_median_s)}, p90 {ms(s.predicted_p90_s)} (predicted, "
                 "built element by element); "
                 f"measured batch times median {ms(s.measured_median_s)}, p90 "
                 f"{ms(s.measured_p90_s)}"),
        numbers={"median_s": s.median_s, "p99_s": s.p99_s, "max_s": s.max_s,
                 "mean_s": s.mean_s, "heavy_share": s.heavy_share, "inflation": s.inflation,
                 "batches_with_heavy": s.batches_with_heavy,
                 "predicted_batch_median_s": s.predicted_median_s,
                 "predicted_batch_p90_s": s.predicted_p90_s,
                 "measured_batch_median_s": s.measured_median_s,
                 "measured_batch_p90_s": s.measured_p90_s,
                 "tail_per_batch_s": s.tail_per_batch_s},
        location=s.stage,
        fix=("bucket elements by length or size so heavy ones are batched together (and "
             "light batches are not held back), precompute the stage offline (store its "
             "output), or give the pipeline more read threads (grain.ReadOptions.num_threads) "
             "so a heavy element is processed beside the light ones"),
    )
