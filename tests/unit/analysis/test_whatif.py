"""The what-if's pure parts: which setting compare's self-check measures, the setting asked
over the run's choice."""

from pipecheck.analysis.loader.whatif import Asked, check_setting, setting_of
from pipecheck.records.grain_settings import GrainSettings


def test_self_check_takes_the_first_neighbour_of_the_choice_not_measured():
    chosen = GrainSettings(workers=2, threads=1)
    measured = [GrainSettings(0), GrainSettings(1), chosen]
    assert check_setting(measured, chosen, max_workers=8) == GrainSettings(workers=3)
    measured.append(GrainSettings(workers=3))
    assert check_setting(measured, chosen, max_workers=8) == GrainSettings(2, threads=2)
    # at the ceiling: no worker more
    assert check_setting([chosen], chosen, max_workers=2) == GrainSettings(2, threads=2)


def test_self_check_without_workers_tries_more_threads_first():
    chosen = GrainSettings(workers=0, threads=4, prefetch=4)
    assert check_setting([chosen], chosen, max_workers=8) == GrainSettings(0, threads=8)


def test_self_check_without_workers_ignores_the_per_worker_buffer():
    chosen = GrainSettings(workers=0, threads=4, prefetch=4)
    measured = [chosen, GrainSettings(1, threads=4, prefetch=4),
                GrainSettings(0, per_worker_buffer=1, threads=8)]
    # one worker more and twice the threads (buffer aside) were measured: half the threads
    assert check_setting(measured, chosen, max_workers=8) == GrainSettings(0, threads=2)
    every = measured + [GrainSettings(0, threads=2)]
    assert check_setting(every, chosen, max_workers=8) is None


def test_knobs_not_asked_keep_the_runs_choice_and_prefetch_follows_threads():
    base = GrainSettings(workers=2, per_worker_buffer=1, threads=4, prefetch=4)
    s = setting_of(Asked(workers=5), base, cores=2)
    assert (s.workers, s.per_worker_buffer, s.threads, s.prefetch, s.cores) == (5, 1, 4, 4, 2)
    s = setting_of(Asked(threads=8, cores=16), base, cores=2)
    assert (s.threads, s.prefetch, s.cores) == (8, 16, 16)


def test_a_pipeline_that_runs_its_own_workers_is_not_predicted():
    import dataclasses
    from pathlib import Path

    import pytest

    from pipecheck.analysis.loader.loader_model import NotPredictable
    from pipecheck.analysis.loader.whatif import OWN_WORKERS, what_if
    from pipecheck.records import store

    data = Path(__file__).parents[2] / "data" / "whatif"
    dl = store.load(data / "dataloader_calibrated_load20_cpu3.json")
    own = dataclasses.replace(dl, results=tuple(
        dataclasses.replace(s, warnings=(f"{OWN_WORKERS} (mp_prefetch(num_workers=4)): ...",))
        for s in dl.results))
    with pytest.raises(NotPredictable, match="fixes its own worker processes"):
        what_if(own, "dl.json", Asked())
    c = store.load(data / "compare_calibrated_load40_cpu2.json")
    fixed = dataclasses.replace(c, tuning=dataclasses.replace(c.tuning, stop="pipeline"))
    with pytest.raises(NotPredictable, match="fixes its own worker processes"):
        what_if(fixed, "c.json", Asked())
    assert what_if(c, "c.json", Asked(workers=2)).setting.workers == 2
