"""Recompile advice by the role of the argument that changed (exact strings of the table)."""

from __future__ import annotations

import pytest

from pipecheck.analysis.recompile_advice import FIXES, argument_role, recompile_fix


@pytest.mark.parametrize("arg, role", [
    ("params['dense']['kernel']", "params"),
    ("state.params['w']", "params"),
    ("opt_state[0].mu['w']", "params"),
    ("train_state.opt_state", "params"),
    ("rngs", "rngs"),
    ("rng", "rngs"),
    ("state.rng", "rngs"),  # a key held in the state is still a key
    ("dropout_rng", "rngs"),
    ("rngs['dropout']", "rngs"),
    ("batch['x']", "batch"),
    ("x", "batch"),
    ("args[0]", "batch"),
    ("keys_seen", "batch"),  # a word that only starts like "keys"
])
def test_the_role_is_read_from_the_arguments_path(arg, role):
    assert argument_role(arg) == role


def test_every_role_has_advice_for_every_change():
    changes = {"sharding", "shape", "dtype", "weak type", "type"}
    assert all(set(fixes) == changes for fixes in FIXES.values())
    assert len({FIXES[r]["sharding"] for r in FIXES}) == len(FIXES)  # each its own


def test_the_fix_follows_the_role_and_the_change():
    assert recompile_fix("params['w']", "sharding") == FIXES["params"]["sharding"]
    assert recompile_fix("rngs", "shape") == FIXES["rngs"]["shape"]
    assert recompile_fix("batch['x']", "sharding") == FIXES["batch"]["sharding"]
    assert "ShapeDtypeStruct" in recompile_fix("batch['x']", "sharding")
    assert recompile_fix("params", "something new") == FIXES["params"]["type"]
