"""The what-if's pure parts: which setting compare's self-check measures, the setting asked
over the run's choice."""

from pipecheck.analysis.whatif import Asked, check_setting, setting_of
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
