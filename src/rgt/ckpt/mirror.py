"""A verified copy of every checkpoint in a durable folder that lags (Google Drive, Kaggle output).

Colab's Drive mount is a FUSE layer that acknowledges a write (and even an ``fsync``) before the
bytes are uploaded; a VM recycled a minute later leaves a "saved" checkpoint that never reached
Drive, or half of it. So checkpoints are written to the fast local disk first (``rgt.ckpt`` as
usual) and only then mirrored, one at a time, in the writer's thread (the training thread with a
synchronous ``Checkpointer``, the background writer with ``asynchronous=True``)::

    <mirror>/.tmp-ckpt-...rgt.part   1. copy of the local data file, fsync'd
                                      2. READ BACK (page cache dropped first) and hashed until it
                                         matches the record's hash, retrying with bounded backoff
                                         while the mount lags; no match by the deadline: the temp
                                         copy is dropped and ``ckpt_mirror_lagging`` is reported
    <mirror>/ckpt-...-<token>.rgt     3. renamed into place
    <mirror>/ckpt-000000001200.json   4. the commit record (format ``rgt.ckpt/3``, same as local)
    <mirror>/LATEST.json              5. the pointer to the newest verified checkpoint

A kill at any moment leaves at most a ``.tmp-*.part`` file (ignored by readers, cleaned by the next
flush) or a data file without its record: never a record or a pointer that vouches for bytes the
read-back did not see. ``Checkpointer.from_env`` mirrors to ``RGT_CKPT_MIRROR`` (rgt sets it for
machines registered with ``rgt up colab``), and ``load_latest`` reads the local directory and the
mirror together, so a new session with an empty local disk resumes from the newest verified copy.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rgt._fs import atomic_write_json, fsync_dir
from rgt.ckpt import _events, _hash, _persist, _store
from rgt.ckpt._store import CheckpointInfo

ENV = "RGT_CKPT_MIRROR"
WAIT_ENV = "RGT_CKPT_MIRROR_WAIT_S"
POINTER = "LATEST.json"
POINTER_FORMAT = "rgt.ckpt.mirror/1"
CHUNK = 8 << 20
FIRST_DELAY_S = 0.05
MAX_DELAY_S = 5.0
DEFAULT_WAIT_S = 300.0
log = logging.getLogger("rgt.ckpt")


@dataclass(frozen=True)
class Flushed:
    """What one flush did: ``verified`` False means the copy was dropped (the mount lagged)."""

    step: int
    path: str
    bytes: int
    seconds: float
    reads: int
    verified: bool


class Mirror:
    """Mirrors committed local checkpoints into ``directory`` with a verified flush."""

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        wait_s: float | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.directory = os.fspath(directory)
        self.wait_s = _wait_from_env() if wait_s is None else wait_s
        self._sleep = sleep

    @classmethod
    def from_env(cls) -> Mirror | None:
        directory = os.environ.get(ENV, "").strip()
        return cls(directory) if directory else None

    def flush(
        self, info: CheckpointInfo, keep_last: int | None, best: str | None, mode: str
    ) -> Flushed:
        """Copy, verify by read-back, rename, commit, point ``LATEST.json`` at it, rotate.

        Never raises for the mount's sake: the local checkpoint is committed already, so an
        unreachable or full durable folder is reported (``ckpt_mirror_lagging``), not fatal."""
        started = time.perf_counter()
        try:
            return self._flush(info, keep_last, best, mode, started)
        except OSError as exc:
            final = os.path.join(self.directory, os.path.basename(info.path))
            return self._lagging(info, final, started, 0, f"{type(exc).__name__}: {exc}")

    def _flush(
        self,
        info: CheckpointInfo,
        keep_last: int | None,
        best: str | None,
        mode: str,
        started: float,
    ) -> Flushed:
        os.makedirs(self.directory, exist_ok=True)
        _store.clean_orphans(self.directory, _store.list_committed(self.directory))
        final = os.path.join(self.directory, os.path.basename(info.path))
        temp = os.path.join(
            self.directory, _persist.TEMP_PREFIX + os.path.basename(final) + ".part"
        )
        _copy(info.path, temp)
        reads = self._await_match(temp, info)
        if reads < 0:
            with contextlib.suppress(OSError):
                os.unlink(temp)
            return self._lagging(info, final, started, -reads)
        os.replace(temp, final)
        fsync_dir(self.directory)
        committed = _store.commit(self.directory, dataclasses.replace(info, path=final))
        write_pointer(self.directory, committed)
        _store.rotate(self.directory, committed, keep_last, best, mode)
        done = Flushed(info.step, final, info.bytes, _since(started), reads, True)
        _events.emit("ckpt_mirrored", _detail(done, self.directory), None)
        return done

    def _await_match(self, temp: str, info: CheckpointInfo) -> int:
        """Read the copy back until it matches the record: the number of reads it took, or
        minus that number if it still differed at the deadline."""
        deadline = time.monotonic() + self.wait_s
        delay, reads = FIRST_DELAY_S, 0
        while True:
            reads += 1
            if _read_back(temp, info):
                return reads
            if time.monotonic() + delay > deadline:
                return -reads
            log.info("mirror copy of step %d not settled yet; reading again", info.step)
            self._sleep(delay)
            delay = min(delay * 2, MAX_DELAY_S)

    def _lagging(
        self, info: CheckpointInfo, final: str, started: float, reads: int, error: str = ""
    ) -> Flushed:
        done = Flushed(info.step, final, info.bytes, _since(started), reads, False)
        newest = read_pointer(self.directory)
        detail = {**_detail(done, self.directory), "newest_verified_step": _step(newest)}
        why = error or f"did not read back intact within {self.wait_s:g} s"
        if error:
            detail["error"] = error
        message = (
            f"the copy of checkpoint step {info.step} in {self.directory} {why}; the local "
            "checkpoint is kept and the next save is mirrored again"
        )
        log.warning(message)
        _events.emit("ckpt_mirror_lagging", detail, _LAGGING_NEXT, severity="warning")
        return done


_LAGGING_NEXT = (
    "keep the session alive until a later save reports ckpt_mirrored (or raise "
    f"{WAIT_ENV}); in Colab, drive.flush_and_unmount() pushes pending uploads"
)


def _copy(source: str, temp: str) -> None:
    """Copy ``source`` to ``temp`` (replacing a leftover of a killed flush) and fsync it."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(temp)
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        with open(source, "rb") as handle:
            while True:
                block = handle.read(CHUNK)
                if not block:
                    break
                _write_all(fd, block)
                _persist._hold("mirror-chunk")
        os.fsync(fd)
        _persist._hold("mirror-written")
    finally:
        os.close(fd)


def _write_all(fd: int, block: bytes) -> None:
    view = memoryview(block)
    while view:
        view = view[os.write(fd, view) :]


def _read_back(path: str, info: CheckpointInfo) -> bool:
    """Whether the file, read from the mount (not our page cache), is the committed bytes."""
    algorithm = _hash.algorithm_of(info.file_hash)
    hasher = _hash.new(algorithm)
    size = 0
    try:
        with open(path, "rb") as handle:
            with contextlib.suppress(OSError, AttributeError):
                os.posix_fadvise(handle.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
            while True:
                block = handle.read(CHUNK)
                if not block:
                    break
                size += len(block)
                hasher.update(block)
    except OSError:
        return False
    return size == info.bytes and _hash.tagged(algorithm, hasher.hexdigest()) == info.file_hash


def write_pointer(directory: str, info: CheckpointInfo) -> None:
    """``LATEST.json``: the newest verified checkpoint, for humans and ``session_ending``."""
    atomic_write_json(
        os.path.join(directory, POINTER),
        {
            "format": POINTER_FORMAT,
            "step": info.step,
            "record": os.path.basename(info.record),
            "file": os.path.basename(info.path),
            "bytes": info.bytes,
            "hash": info.file_hash,
            "time": info.time,
            "verified_at": time.time(),
        },
    )


def read_pointer(directory: str) -> dict[str, Any] | None:
    """The pointer's fields, or None when there is none (or it cannot be read)."""
    import json

    try:
        with open(os.path.join(directory, POINTER), encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("format") == POINTER_FORMAT else None


def committed(local: str, mirror: str | None) -> list[CheckpointInfo]:
    """The local directory's and the mirror's records together, newest step first; at the same
    step the local copy comes first (it is faster to read)."""
    infos = _store.list_committed(local)
    if mirror:
        try:
            infos += _store.list_committed(mirror)
        except OSError as exc:  # Drive unmounted, the transport endpoint gone: local only
            _store.warn(f"cannot read the checkpoint mirror {mirror} ({exc}); using local ones")
    return sorted(
        infos, key=lambda i: (i.step, i.time, os.path.dirname(i.path) == local), reverse=True
    )


def _detail(done: Flushed, directory: str) -> dict[str, Any]:
    return {
        "step": done.step,
        "bytes": done.bytes,
        "seconds": round(done.seconds, 3),
        "reads": done.reads,
        "mirror": directory,
    }


def _step(pointer: dict[str, Any] | None) -> int | None:
    return None if pointer is None else int(pointer.get("step", 0))


def _since(started: float) -> float:
    return time.perf_counter() - started


def _wait_from_env() -> float:
    try:
        return max(0.0, float(os.environ.get(WAIT_ENV, "") or DEFAULT_WAIT_S))
    except ValueError:
        return DEFAULT_WAIT_S
