"""When R saves MaxText's checkpoint where MaxText lacks its own rule (``checkpoint_due``:
0.2.5's default rule). With MaxText 0.2.5, R asks MaxText's own rule; the steps it saves
on in a real run: tests/integration/test_maxtext.py."""

import pytest

from pipecheck.workloads.maxtext_model import checkpoint_due


@pytest.mark.parametrize("period, on_start, due", [
    (30, True, [0, 30]),     # save_checkpoint_on_start (MaxText's default): step 0 too
    (30, False, [30]),
    (25, True, [0, 25, 50]),
    (0, True, []),           # no period: no save
])
def test_checkpoint_is_due_at_maxtexts_steps(period: int, on_start: bool, due: list[int]):
    assert [s for s in range(60) if checkpoint_due(s, period, on_start)] == due
