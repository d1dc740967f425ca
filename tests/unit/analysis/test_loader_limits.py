"""Why more workers stop helping, decided from hand-built resource measurements."""

import math

import pytest

from pipecheck.analysis.loader.loader_limits import (
    CPU_BOUND,
    LATENCY_BOUND,
    LATENCY_BOUND_SHARE,
    LIMIT_MARGIN,
    LIMIT_UNCLEAR,
    MAIN_PROCESS_BOUND,
    MEMORY_BOUND,
    cpu_per_worker,
    limit_findings,
    limit_of,
    main_share,
    worker_compute_share,
)
from pipecheck.analysis.steady_state import loader_estimate
from pipecheck.records.common import Distribution
from pipecheck.records.dataloader import LoaderSetting, Resources
from pipecheck.records.grain_settings import GrainSettings


def setting(workers, main_cpu_s, worker_cpu_s, wall_s=1.0, batches=50, worker_rss=200.0,
            main_rss=400.0, worker_wait_s=0.0, main_wait_s=0.0):
    r = Resources(batches=batches, wall_s=wall_s, main_cpu_s=main_cpu_s,
                  worker_cpu_s=worker_cpu_s, workers_seen=workers, main_rss_mb=main_rss,
                  worker_rss_mb=worker_rss if workers else 0.0,
                  workers_rss_mb=worker_rss * workers, worker_wait_s=worker_wait_s,
                  main_wait_s=main_wait_s)
    d = Distribution.of([wall_s / batches] * batches)
    return LoaderSetting(settings=GrainSettings(workers=workers, threads=1), first_batch_s=1.0,
                         batch_time=d,
                         batches_per_s=batches / wall_s, examples_per_s=0.0, resources=r,
                         loader_time=loader_estimate(d.samples_s, workers, 2))


def test_consumer_busy_most_of_the_time_is_main_process_bound():
    s = setting(4, main_cpu_s=0.85, worker_cpu_s=0.5)
    assert main_share(s) == pytest.approx(0.85)
    assert limit_of(s, cores=2) == MAIN_PROCESS_BOUND
    (f,) = limit_findings([s], cores=2)
    assert f.kind == MAIN_PROCESS_BOUND
    assert f.location == "workers=4, threads=1"
    assert f.message.startswith("the training process spends 17.0 ms "
                                "per batch, 85% of the 20.0 ms a batch takes")


def test_main_process_time_counts_grain_main_stages_when_cpu_time_understates_it():
    from dataclasses import replace

    from pipecheck.records.dataloader import Stage

    s = setting(4, main_cpu_s=0.5, worker_cpu_s=0.5)  # 10 ms CPU per 20 ms batch
    assert limit_of(s, cores=2) != MAIN_PROCESS_BOUND
    consume = Stage("MapDatasetIterator(transform=Consume)", "main", 0.9, 0.85, 0.017, 50)
    in_workers = Stage("MapMapDataset(transform=Load)", "workers", 0.1, 5.0, 0.1, 50)
    s = replace(s, stages=(consume, in_workers))
    assert main_share(s) == pytest.approx(0.85)
    assert limit_of(s, cores=2) == MAIN_PROCESS_BOUND


def test_all_cores_busy_is_cpu_bound():
    s = setting(3, main_cpu_s=0.1, worker_cpu_s=1.7)
    assert limit_of(s, cores=2) == CPU_BOUND
    assert cpu_per_worker(s.resources) == pytest.approx(1.7 / 3)
    (f,) = limit_findings([s], cores=2)
    assert "want 1.8 of 2 cores (running or waiting for one)" in f.message


def test_workers_waiting_for_cores_on_a_busy_machine_are_cpu_bound():
    from dataclasses import replace

    # 3 computing workers; other programs took most of the CPU: each worker ran 0.3 s of
    # its 1 s and waited for a core the rest (never slept)
    s = setting(3, main_cpu_s=0.1, worker_cpu_s=0.9)
    assert limit_of(s, cores=2) == LATENCY_BOUND  # as it looks without the run-queue wait
    s = replace(s, resources=replace(s.resources, worker_wait_s=2.1))
    assert worker_compute_share(s.resources) == pytest.approx(1.0)
    assert limit_of(s, cores=2) == CPU_BOUND


def test_sleeping_workers_waiting_for_cores_after_each_wake_up_stay_latency_bound():
    # 4 workers each sleep 80% of their batch time on an idle machine; a busy machine adds
    # run-queue waits after every wake-up: their share of running or waiting passes one
    # half and the processes want the cores, but of the time not spent waiting they compute
    # only 20%
    s = setting(4, main_cpu_s=0.2, worker_cpu_s=0.6, worker_wait_s=1.0)
    r = s.resources
    assert (r.worker_cpu_s + r.worker_wait_s) / r.wall_s / r.workers_seen == \
        pytest.approx(0.4)
    s = setting(4, main_cpu_s=0.2, worker_cpu_s=0.48, worker_wait_s=1.6)
    r = s.resources
    assert (r.worker_cpu_s + r.worker_wait_s) / r.wall_s / r.workers_seen > 0.5
    assert r.cores_wanted >= 0.85 * 2
    assert worker_compute_share(r) == pytest.approx(0.2)
    assert limit_of(s, cores=2) == LATENCY_BOUND


@pytest.mark.parametrize("share, expected", [
    (LATENCY_BOUND_SHARE - LIMIT_MARGIN - 0.01, LATENCY_BOUND),
    (LATENCY_BOUND_SHARE - LIMIT_MARGIN + 0.01, LIMIT_UNCLEAR),
    (LATENCY_BOUND_SHARE, LIMIT_UNCLEAR),
    (LATENCY_BOUND_SHARE + LIMIT_MARGIN - 0.01, LIMIT_UNCLEAR),
    (LATENCY_BOUND_SHARE + LIMIT_MARGIN + 0.01, CPU_BOUND),
])
def test_the_borderline_band_says_not_sure_instead_of_flipping(share, expected):
    # 4 workers, 1 s: each waited 0.5 s for a core and computed `share` of the other 0.5 s;
    # with the training process they want all of the 2 cores
    s = setting(4, main_cpu_s=0.5, worker_cpu_s=4 * 0.5 * share, worker_wait_s=4 * 0.5,
                main_wait_s=0.5)
    assert worker_compute_share(s.resources) == pytest.approx(share)
    assert s.resources.cores_wanted >= 0.85 * 2
    assert limit_of(s, cores=2) == expected


def test_not_sure_is_a_finding_with_its_numbers_and_what_to_do():
    s = setting(4, main_cpu_s=0.5, worker_cpu_s=1.0, worker_wait_s=2.0, main_wait_s=0.5)
    (f,) = limit_findings([s], cores=2)
    assert f.kind == LIMIT_UNCLEAR and f.location == "workers=4, threads=1"
    assert f.message.startswith("not sure whether the workers compute or sleep: each runs "
                                "50% of the time it is not waiting for a core")
    assert f.numbers["worker_compute_share"] == pytest.approx(0.5)
    assert "more --batches" in f.fix


def test_the_band_only_matters_when_the_cores_are_all_wanted():
    s = setting(2, main_cpu_s=0.1, worker_cpu_s=1.0)  # each worker computes half the time
    assert worker_compute_share(s.resources) == pytest.approx(0.5)
    assert limit_of(s, cores=2) is None  # 1.1 of 2 cores: nothing limits it


def test_idle_workers_are_latency_bound():
    s = setting(6, main_cpu_s=0.05, worker_cpu_s=0.3)
    assert limit_of(s, cores=2) == LATENCY_BOUND
    (f,) = limit_findings([s], cores=2)
    assert "each worker runs only 5% of the time it is not waiting for a core (6.00 ms of " \
        "CPU per 20.0 ms batch, all workers together)" in f.message
    assert "keep helping, also past the core count" in f.message


def test_between_the_thresholds_and_without_workers_nothing_is_claimed():
    assert limit_of(setting(2, main_cpu_s=0.1, worker_cpu_s=1.4), cores=2) is None
    assert limit_of(setting(0, main_cpu_s=1.0, worker_cpu_s=0.0), cores=2) is None
    assert math.isnan(cpu_per_worker(setting(0, 1.0, 0.0).resources))


def test_memory_bound_when_the_next_worker_does_not_fit():
    s = setting(3, main_cpu_s=0.1, worker_cpu_s=1.5, worker_rss=500.0, main_rss=1000.0)
    assert limit_of(s, cores=2) is None
    assert limit_findings([s], cores=2, ram_budget_mb=3000.0) == []  # 4 fit
    (f,) = limit_findings([s], cores=2, ram_budget_mb=2600.0)         # 3 fit
    assert f.kind == MEMORY_BOUND
    assert "each worker peaks at 500 MB" in f.message and "fits at most 3 workers" in f.message
