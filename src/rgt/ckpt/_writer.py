"""Streaming the serialized checkpoint to its temp file: hash, write and flush overlap.

``torch.save`` writes into a ``HashingWriter`` instead of a path, so the bytes are never held
twice in memory. Each large chunk (a tensor's storage) is copied to the page cache while a
second thread runs SHA-256 over it (both release the GIL), and every ``FLUSH_EVERY`` bytes the
kernel is asked to start writeback of what was written so far, so the disk works while later
tensors are still being serialized and the final fsync finds little left to flush. A chunk is
hashed before ``write`` returns: for GPU tensors torch hands over a staging copy that is freed
right after.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from rgt._fs import fsync_dir
from rgt.ckpt._budget import FULL_ERRNOS, full_disk_error

TEMP_PREFIX = ".tmp-"
DATA_PREFIX = "ckpt-"
FLUSH_EVERY = 32 << 20
PARALLEL_HASH_MIN = 1 << 20


@functools.cache
def _sync_file_range() -> Callable[[int, int, int], None] | None:
    """Linux's sync_file_range(SYNC_FILE_RANGE_WRITE): start writeback, keep the page cache."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        call = ctypes.CDLL(None, use_errno=True).sync_file_range  # libc, already loaded
    except (OSError, AttributeError):
        return None
    call.argtypes = (ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint)

    def start_writeback(fd: int, offset: int, length: int) -> None:
        call(fd, offset, length, 2)  # SYNC_FILE_RANGE_WRITE: asynchronous, returns at once

    return start_writeback


class HashingWriter:
    """A write-only file object over ``fd`` that keeps a running SHA-256 of what it wrote."""

    def __init__(self, fd: int, pool: ThreadPoolExecutor) -> None:
        self.fd, self.pool = fd, pool
        self.sha = hashlib.sha256()
        self.written = self.flushed = 0
        self.error: OSError | None = None
        self.start_writeback = _sync_file_range()

    def write(self, chunk: Any) -> int:
        view = memoryview(chunk).cast("B")
        if view.nbytes >= PARALLEL_HASH_MIN:
            hashed = self.pool.submit(self.sha.update, view)
            self._write_all(view)
            hashed.result()
        else:
            self.sha.update(view)
            self._write_all(view)
        self.written += view.nbytes
        if self.start_writeback is not None and self.written - self.flushed >= FLUSH_EVERY:
            self.start_writeback(self.fd, self.flushed, self.written - self.flushed)
            self.flushed = self.written
        return view.nbytes

    def _write_all(self, view: memoryview) -> None:
        offset = 0
        try:
            while offset < view.nbytes:
                offset += os.write(self.fd, view[offset:])
        except OSError as exc:
            self.error = exc  # torch may wrap it in a RuntimeError; keep the errno
            raise

    def flush(self) -> None:
        """torch calls flush(); durability comes from the fsync in ``write_data``."""


def write_data(
    directory: str,
    step: int,
    fill: Callable[[HashingWriter], None],
    pool: ThreadPoolExecutor,
    need_bytes: int,
) -> tuple[str, str, int]:
    """Write the data file durably: ``(path, sha256, bytes)``; a full disk leaves nothing."""
    fd, tmp = tempfile.mkstemp(prefix=TEMP_PREFIX, suffix=".part", dir=directory)
    final = os.path.join(directory, f"{DATA_PREFIX}{step:012d}-{time.time_ns():x}.pt")
    writer = HashingWriter(fd, pool)
    try:
        fill(writer)
        os.fsync(fd)
        os.close(fd)
        fd = -1
        os.replace(tmp, final)
    except BaseException as exc:
        if fd >= 0:
            os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        full = writer.error if writer.error is not None else exc
        if isinstance(full, OSError) and full.errno in FULL_ERRNOS:
            raise full_disk_error(directory, need_bytes, full) from exc
        raise
    fsync_dir(directory)
    return final, writer.sha.hexdigest(), writer.written
