import pytest

TIMING_GROUP = "timing"
"""The pytest-xdist group of the tests marked ``timing`` (their verdicts and relations rest
on measured times): one worker runs them one after another, so at most one other test, never
a second timed scenario, shares the machine with one (``--dist loadgroup``)."""


def pytest_collection_modifyitems(items):
    for item in items:
        if "/integration/" in str(item.fspath):
            item.add_marker(pytest.mark.integration)
        if item.get_closest_marker("timing") is not None:
            item.add_marker(pytest.mark.xdist_group(TIMING_GROUP))
