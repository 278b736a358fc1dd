"""Atomic file writes shared by the CLI, the agent and rgt.ckpt.

Python 3.8 syntax and stdlib only: the agent bundles this module. Every file that another
process may read while it changes (status.json, manifest.json, spec.json, checkpoints) is
written here: temp file in the same directory, fsync, rename, fsync of the directory, so a
reader sees the old content or the new one and never a torn file, even after a power loss.
"""

import contextlib
import errno
import hashlib
import json
import os
import tempfile

CHUNK = 1 << 20


def fsync_dir(path):
    # type: (str) -> None
    """Make a rename in ``path`` durable (the directory entry lives in the directory)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some filesystems (e.g. certain FUSE mounts) refuse fsync on directories
    finally:
        os.close(fd)


def atomic_write_bytes(path, data, mode=0o644):
    # type: (str, bytes, int) -> None
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".part", dir=directory)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(directory)


def atomic_write_json(path, obj):
    # type: (str, object) -> None
    data = json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    atomic_write_bytes(path, data.encode("utf-8"))


def read_json(path):
    # type: (str) -> object
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def sha256_file(path):
    # type: (str) -> str
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while True:
            block = handle.read(CHUNK)
            if not block:
                break
            digest.update(block)
    return digest.hexdigest()


def append_line(path, line):
    # type: (str, str) -> None
    """Append one line with a single write() so concurrent appenders never interleave."""
    data = (line.rstrip("\n") + "\n").encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        written = os.write(fd, data)
    finally:
        os.close(fd)
    if written != len(data):  # a full disk took only part of the line: say so, like ENOSPC
        raise OSError(errno.ENOSPC, f"short write: {written} of {len(data)} bytes", path)
