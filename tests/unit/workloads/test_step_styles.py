"""Flax NNX steps (objects updated in place, the loss returned) and functional steps run
by the same loop, without edits to the user's functions."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from pipecheck.errors import ConfigError
from pipecheck.measure.loop import run_lagged_sync_loop
from pipecheck.measure.spans import SpanRecorder
from pipecheck.workloads.devices import data_mesh, replicated
from pipecheck.workloads.step_styles import (
    FUNCTIONAL,
    IN_PLACE,
    UserStep,
    place_state,
    style_of,
)

BATCH = {"x": np.ones((4, 3), np.float32), "y": np.zeros((4,), np.float32)}


def nnx_state():
    model = nnx.Linear(3, 1, rngs=nnx.Rngs(0))
    optimizer = nnx.Optimizer(model, optax.sgd(0.1), wrt=nnx.Param)
    metrics = nnx.MultiMetric(loss=nnx.metrics.Average("loss"))
    return model, optimizer, metrics


def nnx_step(model, optimizer, metrics, batch):  # not jitted: pipecheck uses nnx.jit
    def loss_fn(m):
        return jnp.mean((m(batch["x"])[:, 0] - batch["y"]) ** 2)

    loss, grads = nnx.value_and_grad(loss_fn)(model)
    optimizer.update(model, grads)
    metrics.update(loss=loss)
    return loss


def test_the_style_is_read_from_the_state():
    model, optimizer, metrics = nnx_state()
    assert style_of((model, optimizer, metrics)) == IN_PLACE
    assert style_of(model) == IN_PLACE
    assert style_of({"w": np.zeros(3)}) == FUNCTIONAL
    assert style_of((np.zeros(3), np.zeros(3))) == FUNCTIONAL


def test_an_nnx_step_runs_in_the_timed_loop_and_updates_in_place():
    state = place_state(nnx_state(), replicated(data_mesh(1)))
    model = state[0]
    before = np.asarray(model.kernel.value).copy()
    step = UserStep(nnx_step)
    step.use_style(state)
    clock = iter(float(i) for i in range(1000))
    outcome = run_lagged_sync_loop(step, state, iter([BATCH] * 4), 4,
                                   SpanRecorder(lambda: next(clock)))
    assert outcome.state is state  # the same objects, updated in place
    assert not np.allclose(np.asarray(model.kernel.value), before)
    assert [s.loss for s in outcome.steps] == sorted(s.loss for s in outcome.steps)[::-1]
    assert int(state[1].step.value) == 4  # the optimizer took every step
    assert step.lower(state, BATCH).compile().cost_analysis() is not None


def test_an_nnx_step_that_returns_nothing_is_a_one_line_error():
    state = nnx_state()

    @nnx.jit
    def returns_none(model, optimizer, metrics, batch):
        nnx_step(model, optimizer, metrics, batch)

    step = UserStep(returns_none)
    step.use_style(state)
    with pytest.raises(ConfigError, match=r"returned None; it must return its loss .* "
                                          r"`return loss`"):
        step(state, BATCH)


def test_a_dict_with_the_loss_is_accepted():
    state = nnx_state()

    def with_metrics(model, optimizer, metrics, batch):
        return {"loss": nnx_step(model, optimizer, metrics, batch), "lr": 0.1}

    step = UserStep(with_metrics)
    step.use_style(state)
    out_state, metrics = step(state, BATCH)
    assert out_state is state and set(metrics) == {"loss", "lr"}


def test_a_functional_step_is_jitted_and_passed_through():
    def sgd(state, batch):
        loss = jnp.mean(batch["x"] @ state["w"])
        return {"w": state["w"] - 0.1}, {"loss": loss}

    step = UserStep(sgd)
    step.use_style({"w": jnp.ones((3,))})
    new, metrics = step({"w": jnp.ones((3,))}, BATCH)
    assert float(metrics["loss"]) == pytest.approx(3.0)
    assert np.allclose(new["w"], 0.9)
    assert isinstance(step.lower({"w": jnp.ones((3,))}, BATCH), jax.stages.Lowered)
