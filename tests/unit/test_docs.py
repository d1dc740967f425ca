"""Docs stay true: every config key of every workload is documented."""

import pathlib

from pipecheck.workloads import calibrated, demo, user

DOCS = pathlib.Path(__file__).parents[2] / "docs"


def test_every_config_key_is_documented():
    text = (DOCS / "config.md").read_text()
    for keys in (demo.KEYS, calibrated.KEYS, user.KEYS):
        for k in keys:
            assert f"| `{k.name}` |" in text, k.name
