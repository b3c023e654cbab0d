"""Which filesystem a path lives on, read from /proc/self/mountinfo.

SQLite's WAL mode keeps its index in shared memory, which SQLite's documentation says
does not work over a network filesystem: a state directory on NFS or Lustre (a cluster's
home directories, where `slurm submit` runs the controller on a compute node) must use
the rollback journal instead."""
from __future__ import annotations

import os
from pathlib import Path

NETWORK = frozenset({
    "nfs", "nfs4", "lustre", "cifs", "smb3", "smbfs", "gpfs", "beegfs", "fhgfs", "ceph",
    "glusterfs", "afs", "9p", "panfs", "wekafs", "ocfs2", "gfs2", "orangefs", "pvfs2",
    "fuse.sshfs", "fuse.glusterfs", "fuse.cephfs", "fuse.juicefs", "fuse.s3fs",
    "fuse.gcsfuse", "fuse.rclone",
})


def _unescape(field: str) -> str:
    """mountinfo writes space, tab, newline and backslash as octal escapes."""
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(code, char)
    return field


def filesystem_type(path: Path, mountinfo: str | None = None) -> str | None:
    """The type of the filesystem holding `path` (or its nearest existing parent); None
    where the mount table cannot be read."""
    if mountinfo is None:
        try:
            mountinfo = Path("/proc/self/mountinfo").read_text()
        except OSError:
            return None
    target, rest = Path(path).expanduser().absolute(), Path()
    try:
        while not target.exists() and target != target.parent:
            target, rest = target.parent, Path(target.name) / rest
        where = os.path.normpath(Path(os.path.realpath(target)) / rest)
    except OSError:
        return None  # a stale network mount: its type cannot be trusted
    best, kind = "", None
    for line in mountinfo.splitlines():
        left, sep, right = line.partition(" - ")
        fields = left.split()
        if not sep or len(fields) < 5 or not right.split():
            continue
        point = _unescape(fields[4])
        inside = where == point or where.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, kind = point, right.split()[0]
    return kind


def on_network(path: Path, mountinfo: str | None = None) -> bool:
    return filesystem_type(path, mountinfo) in NETWORK
