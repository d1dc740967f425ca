"""What to do about a recompile, by what changed and the role of the argument that changed.

JAX names the argument whose abstract type changed between two calls (``params['w1']``,
``rngs``, ``batch['x']``, ``state.opt_state[0].mu``); ``compile_watch.describe_difference``
says what changed (sharding, shape, dtype, weak type). The fix depends on whose value it
is: a batch is shaped by the input pipeline, the parameters by the step that returns them,
random keys by where they are split. ``argument_role`` reads the role from the argument's
path (its components' names); ``recompile_fix`` is the advice for a role and a change.
"""

from __future__ import annotations

import re
from typing import Literal

ArgumentRole = Literal["params", "rngs", "batch"]
"""Whose value an argument is: the model's state (parameters, optimizer state), random keys,
or anything else (fed from the input pipeline)."""

PARAMS_NAMES = frozenset({"params", "param", "parameters", "state", "train_state", "model",
                          "opt_state", "optimizer", "variables", "weights", "graphdef"})
"""Path components that name the model's state (Flax ``TrainState``, optax state, NNX)."""

RNG_NAMES = frozenset({"rng", "rngs", "key", "keys", "prng", "prng_key", "dropout_rng",
                       "rng_key", "subkey"})
"""Path components that name random keys (also any component ending in ``_rng`` or
``_key``)."""

_COMPONENT_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def argument_role(arg: str) -> ArgumentRole:
    """The role of the argument JAX named (``params['w1']``, ``state.rng``, ``args[0]``):
    random keys where any component of its path names keys (keys win: ``state.rng`` is a
    key), the model's state where one names parameters or optimizer state, else a batch."""
    parts = [p.lower() for p in _COMPONENT_RE.findall(arg.replace("'", " ").replace('"', " "))]
    if any(p in RNG_NAMES or p.endswith(("_rng", "_key")) for p in parts):
        return "rngs"
    if any(p in PARAMS_NAMES for p in parts):
        return "params"
    return "batch"


FIXES: dict[ArgumentRole, dict[str, str]] = {
    "batch": {
        "sharding": (
            "give the batch's ShapeDtypeStruct the same sharding as the real batch "
            "(jax.ShapeDtypeStruct(shape, dtype, sharding=batch_sharding)) when lowering "
            "AOT, or place the batch with the sharding the step was compiled for"),
        "shape": "give every batch the same shape (drop or pad the remainder batch)",
        "dtype": "cast the batch to one dtype in the input pipeline",
        "weak type": "create the argument with an explicit dtype (jnp.asarray(x, dtype=...))",
        "type": "keep argument types, shapes and shardings identical between calls",
    },
    "params": {
        "sharding": (
            "keep the params' sharding fixed from step to step: place them once "
            "(jax.device_put(params, sharding)) and jit the step with out_shardings for the "
            "params it returns equal to that sharding (or jax.lax.with_sharding_constraint "
            "on them), so the next call gets the sharding the step was compiled for"),
        "shape": (
            "return the params from the step with the shapes they were passed with (build "
            "them once, outside the loop; no step may add, drop or reshape a leaf)"),
        "dtype": (
            "return the params in the dtype they were passed with: cast the update to the "
            "params' dtype (p - lr * g.astype(p.dtype)), or create them in the dtype the "
            "step keeps (mixed precision: cast a copy inside the step, not the params)"),
        "weak type": (
            "create the params with an explicit dtype (jnp.asarray(x, dtype=jnp.float32), "
            "jnp.zeros(shape, jnp.float32)): a Python scalar makes a weakly typed leaf, and "
            "the first update returns it strongly typed"),
        "type": (
            "return the params (and optimizer state) with the same structure, shapes, "
            "dtypes and shardings they were passed with"),
    },
    "rngs": {
        "sharding": (
            "keep the keys where the step was compiled for them: split them inside the "
            "step and return the next key (it keeps the step's sharding), or place each new "
            "key with jax.device_put(key, the sharding of the first)"),
        "shape": (
            "pass keys of one shape every step: split outside the step into a fixed number "
            "(jax.random.split(key, n) with the same n), or pass one key and split it "
            "inside the step"),
        "dtype": (
            "pass keys of one kind throughout: typed key arrays (jax.random.key(seed)) or "
            "raw uint32 keys (jax.random.PRNGKey(seed)), never both (jax.random.key_data / "
            "wrap_key_data convert between them)"),
        "weak type": "pass typed key arrays (jax.random.key(seed)), made once and split",
        "type": (
            "pass keys of one kind and shape every step: typed key arrays "
            "(jax.random.key(seed)), split with jax.random.split"),
    },
}
"""The advice for each role and each way an argument's type changed."""


def recompile_fix(arg: str, what: str) -> str:
    """The fix for argument ``arg`` having changed ``what`` (``describe_difference``'s
    sharding, shape, dtype, weak type or type), by the argument's role."""
    fixes = FIXES[argument_role(arg)]
    return fixes.get(what, fixes["type"])
