"""The on-disk format of a checkpoint directory (format ``rgt.ckpt/3``).

    ckpt-000000001200-<token>.rgt   the data file (layout in ``_format``), written first
    ckpt-000000001200.json          the commit record, written LAST: step, metric, time, file,
                                    bytes, hash of the data file, state_digest, format
    .tmp-*.part                     a save in flight, or left by a killed one (ignored, cleaned)

Format 3 records hold ``hash`` and ``state_digest`` tagged with their algorithm
(``"xxh3_128:<hex>"``, see ``_hash``). Directories written by format ``rgt.ckpt/2`` (the same
files, a bare SHA-256 under ``sha256``) and ``rgt.ckpt/1`` (data files ``*.pt`` holding
``torch.save`` bytes) are still read: the loader picks the reader by the file's suffix and the
hash by the record's tag.

A checkpoint exists only once its record does. Both files go through temp file → fsync →
rename → fsync of the directory, so a ``kill -9`` or a power loss at any moment leaves either the
previous set of checkpoints or the previous set plus the new one, never a record that points at a
half-written file. Each save gets a fresh data file name, so re-saving a step swaps its record
atomically instead of rewriting data that a record still vouches for.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import math
import mmap
import os
import warnings
from collections.abc import Iterable
from dataclasses import dataclass

from rgt._fs import atomic_write_json
from rgt.ckpt import _hash, _persist
from rgt.ckpt._persist import DATA_PREFIX as RECORD_PREFIX
from rgt.ckpt._persist import DATA_SUFFIX, TEMP_PREFIX

FORMAT = "rgt.ckpt/3"
READABLE_FORMATS = ("rgt.ckpt/1", "rgt.ckpt/2", FORMAT)
DATA_SUFFIXES = (".pt", DATA_SUFFIX)
log = logging.getLogger("rgt.ckpt")


class CheckpointFallbackWarning(UserWarning):
    """A committed checkpoint failed verification and an older one was used instead."""


@dataclass(frozen=True)
class CheckpointInfo:
    """What a commit record says about one checkpoint; reading it loads no tensors."""

    step: int
    path: str
    file_hash: str  # tagged with its algorithm; a bare hex string is SHA-256 (format 1 and 2)
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


def commit_whole(directory: str, info: CheckpointInfo) -> CheckpointInfo:
    """``commit``; if writing the record fails (disk or inodes ran out), the uncommitted data
    file goes too, so the failed save leaves the directory as it was."""
    try:
        return commit(directory, info)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(info.path)
        raise _persist.translate(exc, directory, info.bytes) from exc


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
        "hash": info.file_hash,
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
        if os.path.basename(file) != file or data.get("format") not in READABLE_FORMATS:
            raise ValueError(f"bad file name or format: {file!r}, {data.get('format')!r}")
        metric = data.get("metric")
        return CheckpointInfo(
            step=int(data["step"]),
            path=os.path.join(directory, file),
            file_hash=str(data["hash"] if "hash" in data else data["sha256"]),
            state_digest=str(data["state_digest"]),
            metric=None if metric is None else float(metric),
            time=float(data["time"]),
            bytes=int(data["bytes"]),
            record=path,
        )
    except (OSError, ValueError, KeyError, TypeError) as exc:
        warn(f"ignoring unreadable checkpoint record {path}: {exc}")
        return None


def read_data(info: CheckpointInfo) -> bytes | mmap.mmap | None:
    """The data file's bytes (mapped, see ``map_file``), or None (warned) if it cannot be
    read."""
    try:
        return map_file(info.path)
    except OSError as exc:
        warn(f"checkpoint step {info.step}: cannot read {info.path} ({exc}); trying an older one")
        return None


def map_file(path: str) -> bytes | mmap.mmap:
    """A data file's bytes, memory-mapped read-only: hashing and parsing read the page cache
    directly, so loading a checkpoint holds one copy of the state in memory (the tensors), not
    two. Committed data files are never rewritten in place (rotation unlinks, which keeps the
    mapping valid)."""
    with open(path, "rb") as handle:
        if os.fstat(handle.fileno()).st_size == 0:
            return b""
        mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    if hasattr(mapped, "madvise"):
        mapped.madvise(mmap.MADV_SEQUENTIAL)
    return mapped


def matches(info: CheckpointInfo, data: bytes | mmap.mmap, file_hash: str) -> bool:
    """Whether ``data`` (whose hash is ``file_hash``) is what the record committed; warns if
    not."""
    if len(data) == info.bytes and file_hash == info.file_hash:
        return True
    warn(
        f"checkpoint step {info.step}: {info.path} is corrupt or truncated "
        f"({len(data)} of {info.bytes} bytes, {_hash.algorithm_of(info.file_hash)} mismatch); "
        "trying an older one"
    )
    return False


def read_verified(info: CheckpointInfo) -> bytes | mmap.mmap | None:
    """The data file's bytes if they match the record's size and hash, else None (warned)."""
    data = read_data(info)
    if data is None or not matches(info, data, _hash.of_bytes(data, info.file_hash)):
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
        data = name.startswith(RECORD_PREFIX) and name.endswith(DATA_SUFFIXES)
        orphan = data and name not in referenced
        if temp or orphan:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(directory, name))
            removed.append(name)
    return removed


def rotate(
    directory: str,
    newest: CheckpointInfo,
    keep_last: int | None,
    best_metric: str | None,
    mode: str,
) -> None:
    """Retention: keep the ``keep_last`` newest intact checkpoints, ``newest`` and the best one
    by metric (when ``best_metric`` is set); remove the rest and any orphaned data files."""
    committed = list_committed(directory)
    intact = [info for info in committed if is_intact(info)]
    for info in committed:
        if info not in intact:
            warn(
                f"removing checkpoint step {info.step}: data file missing or wrong size "
                f"({info.path})"
            )
    ranked = intact if keep_last is None else intact[:keep_last]
    keep = {info.record for info in ranked} | {newest.record}
    top = best(intact, mode) if best_metric is not None else None
    keep |= {top.record} if top is not None else set()
    remove(info for info in committed if info.record not in keep)
    clean_orphans(directory, [i for i in committed if i.record in keep])


def best(infos: Iterable[CheckpointInfo], mode: str) -> CheckpointInfo | None:
    """The checkpoint with the best metric ("max" or "min"); ties go to the newer one
    (``infos`` is newest first and max() keeps the first)."""
    scored = [i for i in infos if i.metric is not None and not math.isnan(i.metric)]
    sign = 1.0 if mode == "max" else -1.0
    return max(scored, key=lambda i: sign * (i.metric or 0.0), default=None)
