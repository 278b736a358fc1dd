"""``state_digest``: one SHA-256 over the *values* of a training state.

Two runs that reached bit-identical training state must get the same digest, even when pickling
details differ (tensor storage sharing, zip member order, timestamps, tuple vs list after a
round trip through ``torch.load``). So the digest walks the nested state and hashes a canonical,
length-framed encoding: dict keys in sorted order, every tensor by dtype, shape and raw bytes,
floats by their exact hex form. torch and numpy are looked up in ``sys.modules`` only: if they
were never imported, the state cannot hold their objects, so importing this module stays cheap.
"""

from __future__ import annotations

import hashlib
import struct
import sys
from collections.abc import Mapping
from typing import Any

from rgt.errors import CheckpointError

_SCALARS = (type(None), bool, int, float, str, bytes)


def state_digest(state: object) -> str:
    """Hex SHA-256 of the canonical encoding of ``state`` (see the module docstring)."""
    hasher = hashlib.sha256(b"rgt.state_digest/1")
    _feed(hasher, state, "state")
    return hasher.hexdigest()


def _frame(hasher: Any, tag: bytes, payload: bytes) -> None:
    hasher.update(tag + struct.pack("<Q", len(payload)) + payload)


def _feed(hasher: Any, obj: object, where: str) -> None:
    if isinstance(obj, _SCALARS):
        _feed_scalar(hasher, obj)
    elif isinstance(obj, Mapping):
        _feed_mapping(hasher, obj, where)
    elif isinstance(obj, list | tuple):
        _frame(hasher, b"L", str(len(obj)).encode())
        for index, item in enumerate(obj):
            _feed(hasher, item, f"{where}[{index}]")
    elif not _feed_array(hasher, obj):
        raise CheckpointError(
            f"cannot digest {where}: unsupported type {type(obj).__module__}.{type(obj).__name__}",
            fix="store plain containers, numbers, strings, tensors or numpy arrays in the state "
            "(call .state_dict() on objects; convert custom objects to dicts)",
        )


def _feed_scalar(hasher: Any, obj: object) -> None:
    if obj is None:
        _frame(hasher, b"N", b"")
    elif isinstance(obj, bool):
        _frame(hasher, b"B", b"1" if obj else b"0")
    elif isinstance(obj, int):
        _frame(hasher, b"I", str(obj).encode())
    elif isinstance(obj, float):
        _frame(hasher, b"F", float(obj).hex().encode())
    elif isinstance(obj, str):
        _frame(hasher, b"S", obj.encode("utf-8", "surrogatepass"))
    else:
        assert isinstance(obj, bytes)
        _frame(hasher, b"Y", obj)


def _key_order(key: object) -> tuple[str, str]:
    return (type(key).__name__, repr(key))


def _feed_mapping(hasher: Any, obj: Mapping[Any, Any], where: str) -> None:
    _frame(hasher, b"D", str(len(obj)).encode())
    for key in sorted(obj, key=_key_order):
        _feed(hasher, key, f"{where} key")
        _feed(hasher, obj[key], f"{where}[{key!r}]")


def _feed_array(hasher: Any, obj: object) -> bool:
    """Tensors, numpy arrays and the small torch/numpy value types; False if none of them."""
    torch = sys.modules.get("torch")
    numpy = sys.modules.get("numpy")
    if torch is not None and isinstance(obj, torch.Tensor):
        _feed_tensor(hasher, obj, torch)
    elif torch is not None and isinstance(obj, torch.dtype | torch.device):
        _frame(hasher, b"T", str(obj).encode())
    elif numpy is not None and isinstance(obj, numpy.ndarray):
        array = numpy.ascontiguousarray(obj)
        _feed_raw(hasher, array.dtype.str, array.shape, memoryview(array).cast("B"))
    elif numpy is not None and isinstance(obj, numpy.generic):
        _feed(hasher, obj.item(), "numpy scalar")
    else:
        return False
    return True


def _feed_tensor(hasher: Any, tensor: Any, torch: Any) -> None:
    flat = tensor.detach()
    if flat.layout != torch.strided:
        flat = flat.to_dense()
    flat = flat.cpu().contiguous().reshape(-1).view(torch.uint8)
    # A zero-copy view of the tensor's bytes; hashlib releases the GIL while it hashes it.
    raw = memoryview(flat.numpy()) if flat.numel() else memoryview(b"")
    _feed_raw(hasher, str(tensor.dtype), tuple(tensor.shape), raw)


def _feed_raw(hasher: Any, dtype: str, shape: tuple[int, ...], raw: memoryview) -> None:
    header = f"{dtype}|{','.join(map(str, shape))}".encode()
    _frame(hasher, b"A", header)
    hasher.update(struct.pack("<Q", raw.nbytes))
    hasher.update(raw)


def payload_estimate(state: object) -> int:
    """About how many bytes ``torch.save(state)`` writes, without serializing it.

    torch.save writes each tensor's whole storage once (views share it), plus a zip header,
    alignment padding and pickle framing per tensor; everything else is small by comparison.
    """
    storages: dict[int, int] = {}
    other = _walk_sizes(state, storages)
    return sum(storages.values()) + 1024 * len(storages) + other + (64 << 10)


def _walk_sizes(obj: object, storages: dict[int, int]) -> int:
    torch = sys.modules.get("torch")
    numpy = sys.modules.get("numpy")
    if isinstance(obj, Mapping):
        return sum(_walk_sizes(k, storages) + _walk_sizes(v, storages) for k, v in obj.items())
    if isinstance(obj, list | tuple):
        return sum(_walk_sizes(item, storages) for item in obj)
    if torch is not None and isinstance(obj, torch.Tensor):
        storage = obj.untyped_storage()
        storages[storage.data_ptr()] = storage.nbytes()
        return 0
    if numpy is not None and isinstance(obj, numpy.ndarray):
        return int(obj.nbytes) + 256
    if isinstance(obj, str | bytes):
        return len(obj) + 8
    return 16
