"""Exceptions from the user's code become one line naming the role, the user's file:line
and the exception; the full stack is kept for --traceback."""

from __future__ import annotations

import json
import pathlib
import sys
import traceback

import pytest

from pipecheck.cli import split_traceback_flag
from pipecheck.errors import DataError, PipelineError, UserCodeError
from pipecheck.user_code import (
    GuardedStep,
    guarded,
    is_user_file,
    pipeline_error,
    user_code_error,
)

USER_SOURCE = """\
import json


def init(config):
    if config["hidden"] < 0:
        raise ValueError(f"hidden must be positive, got {config['hidden']}")
    return {}


def parse(text):
    return json.loads(text)
"""


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    """Functions compiled from a file in the working directory, as the user's code is."""
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "model.py"
    path.write_text(USER_SOURCE)
    namespace: dict = {}
    exec(compile(USER_SOURCE, str(path), "exec"), namespace)
    return namespace


def raised(fn, *args):
    try:
        fn(*args)
    except Exception as e:  # noqa: BLE001
        return e
    raise AssertionError("did not raise")


def raised_in_library(fn, *args):
    """An exception whose traceback holds only library frames (this test's frame cut)."""
    e = raised(fn, *args)
    return e.with_traceback(e.__traceback__.tb_next)


def test_the_message_names_role_file_line_and_exception(user_module):
    err = user_code_error("init", raised(user_module["init"], {"hidden": -1}))
    assert str(err) == "init (model.py:6) raised ValueError: hidden must be positive, got -1"
    assert isinstance(err, UserCodeError) and err.exit_code == 5
    assert 'model.py", line 6, in init' in err.details
    assert err.details.rstrip().endswith("ValueError: hidden must be positive, got -1")


def test_library_frames_are_skipped_for_the_users_line(user_module):
    # json.loads raises deep inside the standard library; the user's line is the call.
    err = user_code_error("dataset", raised(user_module["parse"], "{not json"))
    assert str(err).startswith("dataset (model.py:11) raised JSONDecodeError: ")


def test_without_a_user_frame_only_the_role_is_named():
    err = user_code_error("dataset", raised_in_library(json.loads, "{"))
    assert str(err).startswith("dataset raised JSONDecodeError: ")


def test_what_counts_as_user_code(tmp_path):
    import sys

    import jax.numpy  # noqa: F401 - an installed package

    assert is_user_file(str(tmp_path / "model.py"))
    assert not is_user_file(json.__file__)
    assert not is_user_file(sys.modules["jax.numpy"].__file__)
    assert not is_user_file(pipeline_error.__code__.co_filename)  # pipecheck itself
    assert not is_user_file("<frozen runpy>")


def test_pipeline_errors_name_the_users_dataset_or_the_setting(user_module):
    user = pipeline_error(raised(user_module["parse"], "{"), "workers=2, threads=1")
    assert isinstance(user, UserCodeError)
    assert str(user).endswith("(in the input pipeline, workers=2, threads=1)")
    ours = pipeline_error(raised_in_library(json.loads, "{"), "workers=2, threads=1")
    assert type(ours) is PipelineError
    assert str(ours).startswith("the input pipeline (workers=2, threads=1) raised "
                                "JSONDecodeError")
    data = pipeline_error(DataError("cannot read record 3 of x"), "workers=0, threads=1")
    assert type(data) is DataError
    assert str(data) == "the input pipeline (workers=0, threads=1) failed: cannot read " \
                        "record 3 of x"


def test_guarded_entry_point(user_module):
    init = guarded("init", user_module["init"])
    assert init({"hidden": 1}) == {}
    with pytest.raises(UserCodeError, match=r"^init \(model.py:6\) raised ValueError"):
        init({"hidden": -1})


def test_guarded_step_passes_attributes_through(user_module):
    class Jitted:
        def __call__(self, state, batch):
            return user_module["init"](batch)

        def lower(self, *args):
            return ("lowered", args)

    step = GuardedStep(Jitted())
    assert step.lower(1, 2) == ("lowered", (1, 2))
    assert step(None, {"hidden": 0}) == {}
    with pytest.raises(UserCodeError, match=r"^train_step \(model.py:6\) raised ValueError"):
        step(None, {"hidden": -1})


@pytest.mark.parametrize("argv,rest,found", [
    (["synthetic", "--traceback", "--steps", "3"], ["synthetic", "--steps", "3"], True),
    (["--traceback", "compare"], ["compare"], True),
    (["synthetic"], ["synthetic"], False),
    (["plot", "--", "--traceback"], ["plot", "--", "--traceback"], False),
])
def test_traceback_flag_is_taken_from_anywhere(argv, rest, found):
    assert split_traceback_flag(argv) == (rest, found)


# --- code that cloudpickle sent to a Grain worker by value -----------------------------------
@pytest.fixture
def remembered(monkeypatch):
    """An empty list of remembered user files for the test (the real one is per process)."""
    from pipecheck import user_code

    files: list[str] = []
    monkeypatch.setattr(user_code, "_USER_FILES", files)
    return files


def nameless_copy(path, name):
    """``name`` from ``path`` compiled as cloudpickle 3.1.3 rebuilds it in a worker: the
    same lines, the file name replaced by ``<dynamic-code>``."""
    namespace: dict = {}
    exec(compile(path.read_text(), "<dynamic-code>", "exec"), namespace)
    return namespace[name]


def raised_in_worker(fn, *args):
    """The exception with the worker's frames only (this test's own frame cut)."""
    return raised_in_library(fn, *args)


def test_a_nameless_frame_is_mapped_back_to_the_users_file(user_module, remembered):
    from pipecheck.user_code import remember_user_file

    path = pathlib.Path("model.py").resolve()
    remember_user_file(str(path))
    exc = raised_in_worker(nameless_copy(path, "init"), {"hidden": -1})
    assert traceback.extract_tb(exc.__traceback__)[-1].filename == "<dynamic-code>"
    err = user_code_error("init", exc)
    assert str(err) == ("init (model.py:6) raised ValueError: hidden must be positive, "
                        "got -1")


def test_a_nameless_frame_stays_unnamed_without_the_file_or_when_ambiguous(
        user_module, remembered, tmp_path):
    from pipecheck.user_code import remember_user_file

    path = pathlib.Path("model.py").resolve()
    copy = nameless_copy(path, "init")
    assert str(user_code_error("init", raised_in_worker(copy, {"hidden": -1}))).startswith(
        "init raised ValueError")                      # no file remembered: no guess
    twin = tmp_path / "twin.py"
    twin.write_text(path.read_text())                 # the same function at the same line
    remember_user_file(str(path))
    remember_user_file(str(twin))
    assert str(user_code_error("init", raised_in_worker(copy, {"hidden": -1}))).startswith(
        "init raised ValueError")                      # two candidates: no guess either


def test_the_installed_cloudpickle_by_value_round_trip_names_the_users_line(
        tmp_path, remembered, monkeypatch):
    """What a Grain worker runs: the user's file imported as pipecheck imports it, its
    function pickled by value and rebuilt, with whatever cloudpickle is installed."""
    import cloudpickle

    from pipecheck.workloads.user import import_file

    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "elsewhere" / "parse_model.py"
    path.parent.mkdir()
    path.write_text(USER_SOURCE)
    module = import_file(path, "dataset")
    try:
        rebuilt = cloudpickle.loads(cloudpickle.dumps(module.parse))
        exc = raised_in_worker(rebuilt, "{not json")
    finally:
        sys.modules.pop(module.__name__, None)
    assert str(user_code_error("dataset", exc)).startswith(
        "dataset (elsewhere/parse_model.py:11) raised JSONDecodeError: ")
