"""Export a checkpoint to a plain file any PyTorch user can open: no lock-in to rgt's format.

``torch``: the exact nested state, written with ``torch.save`` (load it with
``torch.load(path, weights_only=True)``). ``safetensors``: the tensors of the state flattened to
dotted names (``model.0.weight``, ``optimizer.state.0.exp_avg``), with every non-tensor value
(step, epoch, learning rates, RNG lists) kept as JSON in the file's metadata under
``rgt.values``. Both are written atomically (temp file, fsync, rename).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rgt._fs import fsync_dir
from rgt.ckpt._load import load_data_file, torch_module
from rgt.ckpt._store import list_committed
from rgt.errors import CheckpointError, UsageError

FORMATS = ("torch", "safetensors")


@dataclass(frozen=True)
class Exported:
    source: str
    path: str
    format: str
    step: int | None
    tensors: int
    bytes: int


def export(source: str | os.PathLike[str], out: str | os.PathLike[str], fmt: str) -> Exported:
    """Write the checkpoint ``source`` (a data file, or a directory: its newest verified
    checkpoint) to ``out`` as ``fmt`` (``torch`` or ``safetensors``)."""
    if fmt not in FORMATS:
        raise UsageError(f"unknown export format {fmt!r}", fix=f"use one of {', '.join(FORMATS)}")
    data_file, step = _resolve(os.fspath(source))
    state = load_data_file(data_file, map_location="cpu")
    target = os.fspath(out)
    tensors = _write_torch(state, target) if fmt == "torch" else _write_safetensors(state, target)
    return Exported(data_file, target, fmt, step, tensors, os.path.getsize(target))


def _resolve(source: str) -> tuple[str, int | None]:
    if os.path.isfile(source):
        return source, None
    if os.path.isdir(source):
        from rgt.ckpt.checkpointer import Checkpointer

        info = Checkpointer(source).latest_info()
        if info is not None:
            return info.path, info.step
        found = len(list_committed(source))
        raise CheckpointError(
            f"no verified checkpoint in {source} ({found} committed record(s))",
            path=source,
            fix="pass a directory written by rgt.ckpt, or one ckpt-*.rgt / ckpt-*.pt data file",
        )
    raise UsageError(f"{source} does not exist", fix="pass a checkpoint directory or data file")


def _atomic(target: str, write: Any) -> None:
    directory = os.path.dirname(os.path.abspath(target))
    fd, temp = tempfile.mkstemp(prefix=".tmp-", suffix=".part", dir=directory)
    os.close(fd)
    try:
        write(temp)
        with open(temp, "rb+") as handle:
            os.fsync(handle.fileno())
        os.replace(temp, target)
    except BaseException:
        if os.path.exists(temp):
            os.unlink(temp)
        raise
    fsync_dir(directory)


def _write_torch(state: Any, target: str) -> int:
    torch = torch_module()
    _atomic(target, lambda temp: torch.save(state, temp))
    tensors, _values = _flatten(state)
    return len(tensors)


def _write_safetensors(state: Any, target: str) -> int:
    try:
        from safetensors.torch import save_file
    except ImportError as exc:
        raise CheckpointError(
            "safetensors is not installed", fix="pip install safetensors, or export --to torch"
        ) from exc
    tensors, values = _flatten(state)
    metadata = {"rgt.values": json.dumps(values, default=str, allow_nan=True)}
    _atomic(target, lambda temp: save_file(tensors, temp, metadata=metadata))
    return len(tensors)


def _flatten(state: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """Tensors (numpy arrays converted, shared storage cloned) and other leaves, by dotted name."""
    torch = torch_module()
    tensors: dict[str, Any] = {}
    values: dict[str, Any] = {}
    seen: set[int] = set()
    for name, leaf in _leaves(state, ""):
        if name in tensors or name in values:
            raise UsageError(
                f"two values flatten to the same name {name!r}",
                fix="export --to torch, which keeps the nested structure",
            )
        if type(leaf).__module__ == "numpy" and hasattr(leaf, "shape"):
            leaf = torch.from_numpy(leaf.copy())
        if isinstance(leaf, torch.Tensor):
            pointer = leaf.untyped_storage().data_ptr()
            shared = pointer in seen and leaf.numel() > 0
            seen.add(pointer)
            tensors[name] = (
                leaf.detach().cpu().contiguous().clone() if shared else leaf.contiguous()
            )
        else:
            values[name] = leaf
    return tensors, values


def _leaves(obj: Any, prefix: str) -> Any:
    if isinstance(obj, Mapping):
        for key, value in obj.items():
            yield from _leaves(value, f"{prefix}{key}.")
    elif isinstance(obj, list | tuple):
        for index, value in enumerate(obj):
            yield from _leaves(value, f"{prefix}{index}.")
    else:
        yield prefix[:-1] or "value", obj
