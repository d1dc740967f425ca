"""The test harness's ``--pin-workers``: each pytest-xdist worker's share of the CPUs."""

from tests.conftest import cpu_share


def test_equal_slices_of_the_cpus_one_slice_a_worker():
    cpus = [0, 1, 2, 3, 4, 5, 6, 7]
    shares = [cpu_share(cpus, w, 2) for w in range(2)]
    assert shares == [{0, 1, 2, 3}, {4, 5, 6, 7}]
    assert cpu_share([0, 1], 1, 2) == {1}
    # a CPU left over stays unused rather than making the shares unequal
    assert [cpu_share([0, 1, 2], w, 2) for w in range(2)] == [{0}, {1}]


def test_more_workers_than_cpus_take_them_in_turn():
    assert [cpu_share([2, 5], w, 3) for w in range(3)] == [{2}, {5}, {2}]
