"""The sync classifier on hand-built stacks, and the sampler with an injected stack source."""

import os

import pipecheck
from pipecheck.measure.sync_locator import FrameInfo, SyncLocator, classify

SITE = os.path.join(os.sep, "site-packages")
JAX_ARRAY = f"{SITE}/jax/_src/array.py"
JAX_API = f"{SITE}/jax/_src/api.py"
PKG = os.path.dirname(pipecheck.__file__)
USER = "/home/me/train.py"


def test_float_of_a_jax_array_is_attributed_to_the_user_line():
    stack = [FrameInfo(JAX_ARRAY, 623, "_value"), FrameInfo(f"{SITE}/jax/_src/profiler.py", 420,
             "wrapper"), FrameInfo(JAX_ARRAY, 300, "__float__"), FrameInfo(USER, 88, "train")]
    site, internal = classify(stack)
    assert (site.filename, site.lineno, internal) == (USER, 88, False)


def test_block_until_ready_method_blocks_in_cpp_with_the_user_frame_on_top():
    stack = [FrameInfo(USER, 12, "loop", "state.block_until_ready()"), FrameInfo(USER, 30, "main")]
    site, internal = classify(stack)
    assert site.lineno == 12 and not internal


def test_np_asarray_is_a_sync():
    assert classify([FrameInfo(USER, 5, "f", "np.asarray(loss)")]) is not None


def test_jax_block_until_ready_function():
    stack = [FrameInfo(JAX_API, 2492, "try_to_block"), FrameInfo(JAX_API, 2509,
             "block_until_ready"), FrameInfo(USER, 7, "f")]
    assert classify(stack)[0].lineno == 7


def test_plain_user_code_and_dispatch_are_not_syncs():
    assert classify([FrameInfo(USER, 5, "f", "x + 1")]) is None
    dispatch = [FrameInfo(f"{SITE}/jax/_src/pjit.py", 100, "cache_miss"), FrameInfo(USER, 9, "f")]
    assert classify(dispatch) is None
    assert classify([]) is None


def test_pipecheck_lagged_sync_is_internal_but_workloads_are_user_code():
    timing = os.path.join(PKG, "measure", "loop.py")
    stack = [FrameInfo(JAX_ARRAY, 623, "_value"), FrameInfo(timing, 34, "read_scalar")]
    assert classify(stack)[1] is True
    workload = os.path.join(PKG, "workloads", "calibrated.py")
    stack = [FrameInfo(JAX_ARRAY, 623, "_value"), FrameInfo(workload, 90, "log_current_loss"),
             FrameInfo(timing, 80, "run_lagged_sync_loop")]
    site, internal = classify(stack)
    assert site.filename == workload and internal is False


def test_sampler_charges_elapsed_time_to_sites():
    loc = SyncLocator(clock=lambda: 0.0, get_stack=lambda tid: [])
    user_sync = [FrameInfo(JAX_ARRAY, 623, "_value"), FrameInfo(USER, 88, "train")]
    for _ in range(3):
        loc.record(user_sync, 0.004)
    loc.record([FrameInfo(USER, 10, "train", "x = 1")], 0.004)
    (site,) = loc.sites()
    assert site.location == f"{USER}:88" and site.samples == 3
    assert abs(site.seconds - 0.012) < 1e-12
    assert loc.samples == 4


def test_a_blocking_call_on_a_host_value_is_host_work_not_a_sync():
    """``np.array(img, dtype=np.float32)`` decoding an image in a data generator converts a
    host value: the operand is looked up in the frame and the sample is not a wait."""
    import sys

    import numpy as np

    from pipecheck.measure.sync_locator import operand_kind

    img = np.zeros((4, 4), np.uint8)
    frame = sys._getframe()
    assert operand_kind("np.array(img, dtype=np.float32)", frame) == "host"
    assert img.size  # the local the lookup read
    host = FrameInfo(USER, 58, "decode", "np.array(img, dtype=np.float32)", "host")
    assert classify([host]) is None
    unknown = FrameInfo(USER, 58, "decode", "np.array(img, dtype=np.float32)", "")
    assert classify([unknown]) is not None  # not resolvable: still a wait, as before


def test_the_operand_of_a_blocking_call_on_a_device_value_is_device():
    import sys

    import jax.numpy as jnp

    from pipecheck.measure.sync_locator import blocking_operand, operand_kind

    loss = jnp.float32(2.0)
    metrics = {"loss": loss}
    batch = [1, 2]
    frame = sys._getframe()
    assert operand_kind("loss.item()", frame) == "device"
    assert operand_kind('metrics["loss"].item()', frame) == "device"
    assert operand_kind("np.asarray(metrics)", frame) == "device"  # a dict holding one
    assert operand_kind("jax.device_get(loss)", frame) == "device"
    assert operand_kind("np.asarray(batch)", frame) == "host"
    assert operand_kind("np.asarray(self.loss)", frame) == ""  # an attribute: not read
    assert operand_kind("np.asarray(nowhere)", frame) == ""
    assert blocking_operand("x + 1") is None and blocking_operand("np.asarray(") is None
    assert metrics and batch
