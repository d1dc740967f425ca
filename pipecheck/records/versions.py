"""Which record formats this pipecheck reads, and how an older one becomes the current one.

A file carries its ``format_version``. The version written (``FORMAT_VERSION``) is read as
it is; versions 4 and 5 are converted on reading (``upgrade``), one version after the other:
4 into what version 5 stores, each fact once; 5 into version 6, where a ``profile`` record's
``verdict`` is its one answer, ``host-bound`` included. Any other version is refused in one
line. docs/json-format.md keeps the history."""

from __future__ import annotations

from typing import Any, Mapping

from pipecheck.errors import ResultFormatError
from pipecheck.records.kinds import HOST_BOUND, INCONCLUSIVE

FORMAT_VERSION = 6
"""The version of the record format this pipecheck writes, bumped whenever a field changes
meaning, shape or is removed (docs/json-format.md keeps the history)."""

READ_VERSIONS = (4, 5, FORMAT_VERSION)
"""The versions this pipecheck reads: the one it writes, and the two before it (converted
on reading). Versions 1 to 3 were written only while pipecheck was being built."""

COMPARE_V4_COPIES = ("target_step_s", "chosen_workers", "chosen_threads", "loader_step_s",
                     "real_step_s")
"""Keys a version-4 compare record held besides the facts they copy (``estimates``'
values, ``tuning.chosen``'s workers and threads): version 5 stores each fact once."""

SETTING_V4_KNOBS = ("workers", "per_worker_buffer", "threads", "prefetch")
"""A version-4 loader setting's Grain knobs, stored flat in the setting; version 5 stores
them as its ``settings`` (a GrainSettings)."""

PROFILE_V5_HOST_BOUND = "host_bound"
"""A version-5 ``profile`` record's flag for a host-bound run, whose ``verdict`` then read
``inconclusive``; version 6 says ``host-bound`` in ``verdict`` (and writes ``host_bound``
beside it, read off the verdict)."""


def check_version(data: Mapping[str, Any], origin: str) -> int:
    """The ``format_version`` of a record, or a ResultFormatError when this pipecheck cannot
    read it."""
    version = data.get("format_version")
    if isinstance(version, bool) or version not in READ_VERSIONS:
        raise ResultFormatError(
            f"{origin} has format_version {version!r}; this pipecheck reads versions "
            f"{READ_VERSIONS[0]} to {FORMAT_VERSION} (re-run the measurement with this "
            "version, or upgrade pipecheck)"
        )
    return int(version)


def upgrade(data: Mapping[str, object], origin: str) -> Mapping[str, object]:
    """A record's JSON object as the current version stores it: ``data`` itself when it is
    of that version, a converted copy of a version-4 or -5 one (4 becomes 5, then 5 becomes
    6); any other is refused."""
    version = check_version(data, origin)
    if version == FORMAT_VERSION:
        return data
    out = dict(data)
    if version == 4:
        out = _v5_of_v4(out, origin)
    out["format_version"] = FORMAT_VERSION
    if out.get("kind") == "profile":
        out = _profile_v6(out)
    return out


def _v5_of_v4(out: dict[str, object], origin: str) -> dict[str, object]:
    """A version-4 record as version 5 stores it: each fact once."""
    if out.get("kind") == "compare":
        for key in COMPARE_V4_COPIES:
            out.pop(key, None)
        out["loader"] = _settings_v5(out.get("loader"), f"{origin}: loader")
    elif out.get("kind") == "dataloader":
        out["results"] = _settings_v5(out.get("results"), f"{origin}: results")
    return out


def _profile_v6(out: dict[str, object]) -> dict[str, object]:
    """A version-4 or -5 ``profile`` record as version 6 stores it: a host-bound run (its
    ``host_bound`` true) has ``verdict`` ``host-bound``, where it read ``inconclusive``; so
    has its own row of ``hosts[]`` (the row of the record's host). The other hosts' rows
    kept no flag: an ``inconclusive`` one stays so."""
    if out.pop(PROFILE_V5_HOST_BOUND, None) is not True:
        return out
    out["verdict"] = HOST_BOUND
    env = out.get("env")
    own = env.get("host") if isinstance(env, Mapping) else None
    hosts = out.get("hosts")
    if own is not None and isinstance(hosts, list):
        out["hosts"] = [{**h, "verdict": HOST_BOUND}
                        if isinstance(h, Mapping) and h.get("host") == own
                        and h.get("verdict") == INCONCLUSIVE else h for h in hosts]
    return out


def _settings_v5(settings: object, where: str) -> object:
    """A version-4 list of loader settings, each with its knobs as one ``settings``."""
    if not isinstance(settings, list):
        return settings  # what is wrong with it is said where it is read
    return [_setting_v5(s, where) for s in settings]


def _setting_v5(setting: object, where: str) -> object:
    if not isinstance(setting, Mapping):
        return setting
    if "workers" not in setting or "threads" not in setting:
        raise ResultFormatError(f"{where}: a version-4 loader setting without 'workers' and "
                                "'threads'")
    # a buffer or prefetch left out held the field's default, GrainSettings' default too
    knobs = {k: setting[k] for k in SETTING_V4_KNOBS if k in setting}
    rest = {k: v for k, v in setting.items() if k not in SETTING_V4_KNOBS}
    return {"settings": knobs, **rest}
