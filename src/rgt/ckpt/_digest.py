"""``state_digest``: one hash over the *values* of a training state.

Two runs that reached bit-identical training state must get the same digest, even when pickling
details differ (tensor storage sharing, zip member order, timestamps, tuple vs list after a
round trip through ``torch.load``). So the digest walks the nested state and hashes a canonical,
length-framed encoding: dict keys in sorted order, every tensor by dtype, shape and raw bytes,
floats by their exact hex form. torch and numpy are looked up in ``sys.modules`` only: if they
were never imported, the state cannot hold their objects, so importing this module stays cheap.

The encoding is produced as a list of pieces (small framing bytes and references to arrays) by
``encode``. ``state_digest`` hashes the pieces; the checkpoint writer lays the very same pieces
out in its staging arena, so the data file *begins with* the canonical stream and the digest
comes out of the one hash pass that also hashes the file (``rgt.ckpt._format``). The hash is
XXH3-128 (``"xxh3_128:<hex>"``) when xxhash is installed, else SHA-256 (``rgt.ckpt._hash``):
compare digests made by the same algorithm.
"""

from __future__ import annotations

import struct
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Union

from rgt.ckpt import _hash
from rgt.errors import CheckpointError

PREFIX = b"rgt.state_digest/1"
_SCALARS = (type(None), bool, int, float, str, bytes)


@dataclass(frozen=True)
class ArrayRef:
    """One tensor or numpy array in the canonical stream: its raw bytes follow its header."""

    obj: Any
    dtype: str  # str(torch dtype), e.g. "torch.float32", or numpy's dtype.str, e.g. "<f4"
    shape: tuple[int, ...]
    nbytes: int
    is_numpy: bool


Piece = Union[bytes, ArrayRef]  # not `|`: evaluated at import, on the job's Python (3.8+)


class _Pieces:
    def __init__(self) -> None:
        self.items: list[Piece] = []
        self._small = bytearray(PREFIX)

    def add(self, data: bytes) -> None:
        self._small += data

    def array(self, ref: ArrayRef) -> None:
        self._small += struct.pack("<Q", ref.nbytes)
        self.items.append(bytes(self._small))
        self.items.append(ref)
        self._small = bytearray()

    def done(self) -> list[Piece]:
        if self._small:
            self.items.append(bytes(self._small))
        return self.items


def encode(state: object) -> list[Piece]:
    """The canonical stream of ``state`` as pieces; raises ``CheckpointError`` on opaque types."""
    pieces = _Pieces()
    _feed(pieces, state, "state")
    return pieces.done()


def state_digest(state: object, algorithm: str | None = None) -> str:
    """The hash of the canonical encoding of ``state`` (see the module docstring), made with
    ``algorithm`` (default: the one new checkpoints use) in the stored, tagged form."""
    algorithm = algorithm or _hash.default_algorithm()
    hasher = _hash.new(algorithm)
    for piece in encode(state):
        hasher.update(piece if isinstance(piece, bytes) else raw_bytes(piece))
    return _hash.tagged(algorithm, hasher.hexdigest())


def _frame(out: _Pieces, tag: bytes, payload: bytes) -> None:
    out.add(tag + struct.pack("<Q", len(payload)) + payload)


def _feed(out: _Pieces, obj: object, where: str) -> None:
    if isinstance(obj, _SCALARS):
        _feed_scalar(out, obj)
    elif isinstance(obj, Mapping):
        _feed_mapping(out, obj, where)
    elif isinstance(obj, list | tuple):
        _frame(out, b"L", str(len(obj)).encode())
        for index, item in enumerate(obj):
            _feed(out, item, f"{where}[{index}]")
    elif not _feed_array(out, obj):
        raise CheckpointError(
            f"cannot digest {where}: unsupported type {type(obj).__module__}.{type(obj).__name__}",
            fix="store plain containers, numbers, strings, tensors or numpy arrays in the state "
            "(call .state_dict() on objects; convert custom objects to dicts)",
        )


def _feed_scalar(out: _Pieces, obj: object) -> None:
    if obj is None:
        _frame(out, b"N", b"")
    elif isinstance(obj, bool):
        _frame(out, b"B", b"1" if obj else b"0")
    elif isinstance(obj, int):
        _frame(out, b"I", str(obj).encode())
    elif isinstance(obj, float):
        _frame(out, b"F", float(obj).hex().encode())
    elif isinstance(obj, str):
        _frame(out, b"S", obj.encode("utf-8", "surrogatepass"))
    else:
        assert isinstance(obj, bytes)
        _frame(out, b"Y", obj)


def key_order(key: object) -> tuple[str, str]:
    return (type(key).__name__, repr(key))


def _feed_mapping(out: _Pieces, obj: Mapping[Any, Any], where: str) -> None:
    _frame(out, b"D", str(len(obj)).encode())
    for key in sorted(obj, key=key_order):
        _feed(out, key, f"{where} key")
        _feed(out, obj[key], f"{where}[{key!r}]")


def _feed_array(out: _Pieces, obj: object) -> bool:
    """Tensors, numpy arrays and the small torch/numpy value types; False if none of them."""
    torch = sys.modules.get("torch")
    numpy = sys.modules.get("numpy")
    if torch is not None and isinstance(obj, torch.Tensor):
        shape = tuple(obj.shape)
        _array(out, ArrayRef(obj, str(obj.dtype), shape, obj.numel() * obj.element_size(), False))
    elif torch is not None and isinstance(obj, (torch.dtype, torch.device)):
        _frame(out, b"T", str(obj).encode())
    elif numpy is not None and isinstance(obj, numpy.ndarray):
        _array(out, ArrayRef(obj, obj.dtype.str, tuple(obj.shape), int(obj.nbytes), True))
    elif numpy is not None and isinstance(obj, numpy.generic):
        _feed(out, obj.item(), "numpy scalar")
    else:
        return False
    return True


def _array(out: _Pieces, ref: ArrayRef) -> None:
    _frame(out, b"A", f"{ref.dtype}|{','.join(map(str, ref.shape))}".encode())
    out.array(ref)


def raw_bytes(ref: ArrayRef) -> memoryview:
    """A CPU, contiguous byte view of the array (zero-copy when it already is one)."""
    if ref.is_numpy:
        import numpy

        array: Any = numpy.ascontiguousarray(ref.obj)
        return memoryview(array).cast("B")
    return memoryview(flat_tensor_bytes(ref.obj).numpy()) if ref.nbytes else memoryview(b"")


def flat_tensor_bytes(tensor: Any) -> Any:
    """The tensor's values as a flat CPU uint8 tensor (dense, contiguous)."""
    import torch

    flat = tensor.detach()
    if flat.layout != torch.strided:
        flat = flat.to_dense()
    return flat.cpu().contiguous().reshape(-1).view(torch.uint8)
