"""Run several pipecheck commands, and MaxText config reads, in ONE process of MaxText's
Python, so that MaxText and JAX are imported once for all of them (each import costs
seconds on a 2-core machine). Used by ``test_maxtext.py``.

    python maxtext_calls.py CALLS.json     # prints one JSON list of results

``CALLS.json`` is a list of calls: ``["pipecheck", ARG, ...]`` runs ``pipecheck.cli.main``
(its exit code, and what pipecheck itself wrote on stdout and stderr);
``["maxtext-config", FILE, KEY, ...]`` reads FILE with MaxText's ``pyconfig.initialize``
and returns the values of the KEYs.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys


def run_pipecheck(args: list[str]) -> dict[str, object]:
    from pipecheck.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(args)
    return {"rc": code, "stdout": out.getvalue(), "stderr": err.getvalue()}


def read_config(path: str, keys: list[str]) -> dict[str, object]:
    from maxtext.configs import pyconfig

    hp = pyconfig.initialize(["train", path])
    return {"rc": 0, "values": {k: getattr(hp, k) for k in keys}}


def main() -> None:
    with open(sys.argv[1]) as f:
        calls = json.load(f)
    results = []
    for call in calls:
        if call[0] == "pipecheck":
            results.append(run_pipecheck(call[1:]))
        else:
            results.append(read_config(call[1], call[2:]))
    sys.stdout.flush()
    print("\nRESULTS " + json.dumps(results))


if __name__ == "__main__":
    main()
