"""The mount table read the kernel's way: a mount point's escapes undone, malformed lines left
out, the type after the separator."""

from __future__ import annotations

from pipecheck import mounts
from pipecheck.measure.page_cache import filesystem_of


def test_a_mount_points_octal_escapes_are_undone_and_other_characters_kept():
    text = "\n".join([
        "36 25 0:30 / /mnt/with\\040space rw - xfs /dev/vdb rw",
        "37 25 0:31 / /mnt/tab\\011and\\134back rw - ext4 /dev/vdc rw",
        "38 25 0:32 / /données/été rw,relatime shared:1 - fuse.gcsfuse bucket rw",
        "not a mount line",
        "39 25 0:33 / /mnt/no-type rw - ",
    ])
    assert mounts.parse(text) == [
        mounts.Mount("/mnt/with space", "xfs"),
        mounts.Mount("/mnt/tab\tand\\back", "ext4"),
        mounts.Mount("/données/été", "fuse.gcsfuse"),
    ]
    assert filesystem_of("/données/été/shard-0.array_record", text) == "fuse.gcsfuse"


def test_this_processs_table_holds_its_root():
    assert any(m.point == "/" for m in mounts.parse(mounts.read()))
