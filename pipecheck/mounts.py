"""The mount table (``/proc/self/mountinfo``): each mount's point and file system type, its
fields' octal escapes (``\\040`` for a space) undone."""

from __future__ import annotations

import dataclasses
import re

MOUNTINFO = "/proc/self/mountinfo"


@dataclasses.dataclass(frozen=True)
class Mount:
    point: str
    """Where it is mounted (escapes undone)."""
    fstype: str
    """Its file system type (``ext4``, ``fuse.gcsfuse``, ``nfs4``...)."""


def unescape(field: str) -> str:
    """A mount table field with its octal escapes (space, tab, newline, backslash) undone."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def parse(text: str) -> list[Mount]:
    """The mounts in the text of a mount table, in its order (malformed lines left out)."""
    out = []
    for line in text.splitlines():
        head, sep, tail = line.partition(" - ")
        fields = head.split()
        if sep and len(fields) >= 5 and tail.split():
            out.append(Mount(unescape(fields[4]), tail.split()[0]))
    return out


def read() -> str:
    """This process's mount table ("" where it cannot be read)."""
    try:
        with open(MOUNTINFO) as f:
            return f.read()
    except OSError:
        return ""
