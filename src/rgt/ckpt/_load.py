"""Reading a checkpoint's data file, in either format, verified against its commit record.

Format 2 and 3 files (``.rgt``) are parsed from the memory-mapped file (no code runs while
loading, and the file is never copied whole into the process); format 1 files (``.pt``) are
``torch.load(weights_only=True)``. In both cases the bytes are
hashed in a second thread while they are parsed, and the result is kept only if the hash
matches the record: parsing before the hash is known is safe, a damaged file only raises.
"""

from __future__ import annotations

import io
import mmap
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from rgt.ckpt import _format, _hash, _store
from rgt.ckpt._store import CheckpointInfo
from rgt.errors import CheckpointError


def load_one(info: CheckpointInfo, map_location: Any) -> Any:
    """The state of one committed checkpoint, or ``None`` (warned) if it does not verify."""
    data = _store.read_data(info)
    if data is None:
        return None
    with ThreadPoolExecutor(max_workers=1) as pool:
        digest = pool.submit(_hash.of_bytes, data, info.file_hash)
        state, error = deserialize(data, map_location)
        if not _store.matches(info, data, digest.result()):
            return None
    if error is not None:
        _store.warn(
            f"checkpoint step {info.step}: {info.path} verified but failed to load "
            f"({type(error).__name__}: {error}); trying an older one"
        )
    return state


def deserialize(data: bytes | mmap.mmap, map_location: Any = None) -> tuple[Any, Exception | None]:
    """(state, None), or (None, the error) for bytes that do not parse."""
    try:
        if _format.is_arena_file(data[:64]):
            return _format.parse(data, map_location), None
        # weights_only: a checkpoint is data, never code to run (no arbitrary unpickling).
        torch = torch_module()
        return torch.load(io.BytesIO(data), map_location=map_location, weights_only=True), None
    except Exception as exc:  # damaged bytes raise all kinds of errors
        return None, exc


def load_data_file(path: str | os.PathLike[str], map_location: Any = None) -> Any:
    """The state in one data file of either format. If a commit record in the same directory
    names this file, its size and hash must match (else ``CheckpointError``)."""
    path = os.fspath(path)
    data = _store.map_file(path)
    record = _record_of(path)
    if record is not None and (
        len(data) != record.bytes or _hash.of_bytes(data, record.file_hash) != record.file_hash
    ):
        raise CheckpointError(
            f"{path} does not match its commit record {record.record} (size or hash)",
            path=path,
            fix="the file is damaged: use an older checkpoint or restore it from a copy",
        )
    state, error = deserialize(data, map_location)
    if error is not None:
        raise CheckpointError(
            f"{path} is not a loadable checkpoint: {type(error).__name__}: {error}",
            path=path,
            fix="pass a ckpt-*.rgt or ckpt-*.pt data file from a checkpoint directory",
        ) from error
    return state


def _record_of(path: str) -> CheckpointInfo | None:
    directory, name = os.path.split(os.path.abspath(path))
    for info in _store.list_committed(directory):
        if os.path.basename(info.path) == name:
            return info
    return None


def torch_module() -> Any:
    try:
        import torch
    except ImportError as exc:
        raise CheckpointError(
            "rgt.ckpt saves and loads with torch, which is not installed",
            fix="pip install torch (or remote-gpu-trainer[demo])",
        ) from exc
    return torch
