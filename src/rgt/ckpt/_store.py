"""The on-disk format of a checkpoint directory (format ``rgt.ckpt/1``).

    ckpt-000000001200-<token>.pt    the data file (torch.save bytes), written first
    ckpt-000000001200.json          the commit record, written LAST: step, metric, time, file,
                                    bytes, sha256 of the data file, state_digest, format
    .tmp-*.part                     a save in flight, or left by a killed one (ignored, cleaned)

A checkpoint exists only once its record does. Both files go through temp file → fsync →
rename → fsync of the directory, so a ``kill -9`` or a power loss at any moment leaves either the
previous set of checkpoints or the previous set plus the new one, never a record that points at a
half-written file. Each save gets a fresh data file name, so re-saving a step swaps its record
atomically instead of rewriting data that a record still vouches for.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
import os
import tempfile
import time
import warnings
from collections.abc import Iterable
from dataclasses import dataclass

from rgt._fs import atomic_write_json, fsync_dir
from rgt.ckpt._budget import FULL_ERRNOS, full_disk_error

FORMAT = "rgt.ckpt/1"
RECORD_PREFIX = "ckpt-"
TEMP_PREFIX = ".tmp-"
log = logging.getLogger("rgt.ckpt")


class CheckpointFallbackWarning(UserWarning):
    """A committed checkpoint failed verification and an older one was used instead."""


@dataclass(frozen=True)
class CheckpointInfo:
    """What a commit record says about one checkpoint; reading it loads no tensors."""

    step: int
    path: str
    sha256: str
    state_digest: str
    metric: float | None
    time: float
    bytes: int = 0
    record: str = ""


def record_name(step: int) -> str:
    return f"{RECORD_PREFIX}{step:012d}.json"


def warn(message: str) -> None:
    """Tell the user twice: scripts see a ``warnings`` warning, agents' logs see a log line."""
    log.warning(message)
    warnings.warn(message, CheckpointFallbackWarning, stacklevel=3)


def write_data(directory: str, step: int, payload: memoryview) -> str:
    """Write the data file durably and return its path; on a full disk leave nothing behind."""
    fd, tmp = tempfile.mkstemp(prefix=TEMP_PREFIX, suffix=".part", dir=directory)
    final = os.path.join(directory, f"{RECORD_PREFIX}{step:012d}-{time.time_ns():x}.pt")
    try:
        _write_all(fd, payload)
        os.fsync(fd)
        os.close(fd)
        fd = -1
        os.replace(tmp, final)
    except BaseException as exc:
        if fd >= 0:
            os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError) and exc.errno in FULL_ERRNOS:
            raise full_disk_error(directory, payload.nbytes, exc) from exc
        raise
    fsync_dir(directory)
    return final


def _write_all(fd: int, payload: memoryview) -> None:
    chunk = 64 << 20
    offset = 0
    while offset < payload.nbytes:
        offset += os.write(fd, payload[offset : offset + chunk])


def commit(directory: str, info: CheckpointInfo) -> CheckpointInfo:
    """Write the commit record (atomically, durably); from now on the checkpoint exists."""
    record = os.path.join(directory, record_name(info.step))
    fields = {
        "format": FORMAT,
        "step": info.step,
        "metric": info.metric,
        "time": info.time,
        "file": os.path.basename(info.path),
        "bytes": info.bytes,
        "sha256": info.sha256,
        "state_digest": info.state_digest,
    }
    atomic_write_json(record, fields)
    return dataclasses.replace(info, record=record)


def list_committed(directory: str) -> list[CheckpointInfo]:
    """Every readable commit record, newest step first (unreadable ones are warned about)."""
    infos = []
    for name in _names(directory):
        if name.startswith(RECORD_PREFIX) and name.endswith(".json"):
            info = _read_record(directory, name)
            if info is not None:
                infos.append(info)
    return sorted(infos, key=lambda item: (item.step, item.time), reverse=True)


def _names(directory: str) -> list[str]:
    try:
        return os.listdir(directory)
    except FileNotFoundError:
        return []


def _read_record(directory: str, name: str) -> CheckpointInfo | None:
    path = os.path.join(directory, name)
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
        file = str(data["file"])
        if os.path.basename(file) != file or data.get("format") != FORMAT:
            raise ValueError(f"bad file name or format: {file!r}, {data.get('format')!r}")
        metric = data.get("metric")
        return CheckpointInfo(
            step=int(data["step"]),
            path=os.path.join(directory, file),
            sha256=str(data["sha256"]),
            state_digest=str(data["state_digest"]),
            metric=None if metric is None else float(metric),
            time=float(data["time"]),
            bytes=int(data["bytes"]),
            record=path,
        )
    except (OSError, ValueError, KeyError, TypeError) as exc:
        warn(f"ignoring unreadable checkpoint record {path}: {exc}")
        return None


def read_verified(info: CheckpointInfo) -> bytes | None:
    """The data file's bytes if they match the record's size and sha256, else None (warned)."""
    try:
        with open(info.path, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        warn(f"checkpoint step {info.step}: cannot read {info.path} ({exc}); trying an older one")
        return None
    if len(data) != info.bytes or hashlib.sha256(data).hexdigest() != info.sha256:
        warn(
            f"checkpoint step {info.step}: {info.path} is corrupt or truncated "
            f"({len(data)} of {info.bytes} bytes, sha256 mismatch); trying an older one"
        )
        return None
    return data


def is_intact(info: CheckpointInfo) -> bool:
    """Cheap check without hashing: the data file exists with the recorded size."""
    try:
        return os.stat(info.path).st_size == info.bytes
    except OSError:
        return False


def remove(infos: Iterable[CheckpointInfo]) -> None:
    """Uncommit (record first), then delete the data; a kill in between leaves only an orphan."""
    for info in infos:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(info.record)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(info.path)


def clean_orphans(directory: str, keep: Iterable[CheckpointInfo]) -> list[str]:
    """Delete temp files of killed saves and data files no record points to."""
    referenced = {os.path.basename(info.path) for info in keep}
    removed = []
    for name in _names(directory):
        temp = name.startswith(TEMP_PREFIX) and name.endswith(".part")
        orphan = name.startswith(RECORD_PREFIX) and name.endswith(".pt") and name not in referenced
        if temp or orphan:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(directory, name))
            removed.append(name)
    return removed
