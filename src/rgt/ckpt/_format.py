"""The data file of a checkpoint (``ckpt-<step>-<token>.rgt``, layout ``rgt.arena/1``).

    [canonical stream][skeleton JSON][u64 length of the JSON][b"RGTARENA"]

The canonical stream is byte for byte what ``state_digest`` hashes (it starts with
``b"rgt.state_digest/1"``, which doubles as the file's magic): framing bytes, then each tensor's
raw bytes. So one hash pass over the file yields both hashes the commit record carries: the
hasher's state at the end of the stream is the ``state_digest``, at the end of the file the
file's ``hash``. The stream alone is lossy by design (keys sorted, tuple = list), so the
skeleton restores the state exactly as saved: containers in insertion order, tuples, dict key
types, dtypes and devices, each tensor as an index into the array table (offset, bytes, dtype,
shape, device). The file holds only data: loading it runs no code (no unpickling).
"""

from __future__ import annotations

import base64
import collections
import json
import mmap
import struct
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rgt.ckpt._digest import PREFIX, ArrayRef, Piece, encode
from rgt.errors import CheckpointError

LAYOUT = "rgt.arena/1"
END_MAGIC = b"RGTARENA"
_TRAILER = struct.Struct("<Q8s")


@dataclass(frozen=True)
class Layout:
    """Where every piece of one state goes in the file, computed before anything is copied."""

    pieces: list[Piece]
    offsets: list[int]  # file offset of each piece
    stream_bytes: int
    trailer: bytes

    @property
    def total(self) -> int:
        return self.stream_bytes + len(self.trailer)


def plan(state: object) -> Layout:
    """Lay ``state`` out: canonical stream, then the skeleton that restores it exactly."""
    pieces = encode(state)
    offsets: list[int] = []
    table: list[list[Any]] = []
    index_of: dict[int, int] = {}
    offset = 0
    for piece in pieces:
        offsets.append(offset)
        if isinstance(piece, ArrayRef):
            index_of.setdefault(id(piece.obj), len(table))
            table.append(_entry(piece, offset))
            offset += piece.nbytes
        else:
            offset += len(piece)
    skeleton = {"layout": LAYOUT, "stream_bytes": offset, "arrays": table}
    skeleton["state"] = _skeleton(state, index_of)
    meta = json.dumps(skeleton, separators=(",", ":"), allow_nan=False).encode("utf-8")
    return Layout(pieces, offsets, offset, meta + _TRAILER.pack(len(meta), END_MAGIC))


def _entry(ref: ArrayRef, offset: int) -> list[Any]:
    device = "cpu" if ref.is_numpy else str(ref.obj.device)
    return [offset, ref.nbytes, ref.dtype, list(ref.shape), "n" if ref.is_numpy else "t", device]


def _skeleton(obj: object, index_of: dict[int, int]) -> Any:
    """JSON for the structure: plain JSON for None/bool/int/str, a one-key object otherwise."""
    if obj is None or isinstance(obj, (bool, int, str)):
        return obj
    if isinstance(obj, float):
        return {"f": obj.hex()}
    if isinstance(obj, bytes):
        return {"y": base64.b64encode(obj).decode("ascii")}
    if isinstance(obj, Mapping):
        tag = "o" if isinstance(obj, collections.OrderedDict) else "d"
        return {tag: [[_skeleton(k, index_of), _skeleton(v, index_of)] for k, v in obj.items()]}
    if isinstance(obj, list | tuple):
        return {"t" if isinstance(obj, tuple) else "l": [_skeleton(v, index_of) for v in obj]}
    if id(obj) in index_of:
        return {"a": index_of[id(obj)]}
    torch, numpy = sys.modules.get("torch"), sys.modules.get("numpy")
    if torch is not None and isinstance(obj, torch.dtype):
        return {"dt": str(obj)}
    if torch is not None and isinstance(obj, torch.device):
        return {"dv": str(obj)}
    assert numpy is not None and isinstance(obj, numpy.generic)  # encode() rejected the rest
    return _skeleton(obj.item(), index_of)


# --- reading -----------------------------------------------------------------------------------


def is_arena_file(head: bytes) -> bool:
    return head.startswith(PREFIX)


def parse(data: bytes | bytearray | memoryview | mmap.mmap, map_location: Any = None) -> Any:
    """The state stored in ``data`` (a whole data file); raises ``CheckpointError`` if damaged."""
    view = memoryview(data)
    meta = _meta(view)
    stream = int(meta["stream_bytes"])
    arrays = [_array(view, entry, stream, map_location) for entry in meta["arrays"]]
    return _build(meta["state"], arrays)


def _meta(view: memoryview) -> dict[str, Any]:
    if len(view) < len(PREFIX) + _TRAILER.size or bytes(view[: len(PREFIX)]) != PREFIX:
        raise _damaged("not an rgt.ckpt data file (no rgt.state_digest/1 header)")
    length, magic = _TRAILER.unpack(view[-_TRAILER.size :])
    start = len(view) - _TRAILER.size - length
    if magic != END_MAGIC or start < len(PREFIX):
        raise _damaged("truncated: the skeleton trailer is missing")
    try:
        meta: dict[str, Any] = json.loads(bytes(view[start : start + length]))
    except ValueError as exc:
        raise _damaged(f"unreadable skeleton ({exc})") from exc
    if meta.get("layout") != LAYOUT or int(meta.get("stream_bytes", -1)) != start:
        raise _damaged(f"unknown layout {meta.get('layout')!r} or wrong stream length")
    return meta


def _array(view: memoryview, entry: list[Any], stream: int, map_location: Any) -> Any:
    offset, nbytes, dtype, shape, kind, device = entry
    if not 0 <= offset <= offset + nbytes <= stream:
        raise _damaged(f"array at {offset}+{nbytes} lies outside the stream ({stream} bytes)")
    import numpy

    raw = numpy.frombuffer(view, numpy.uint8, nbytes, offset)
    if kind == "n":
        array = numpy.empty(shape, numpy.dtype(dtype))
        array.reshape(-1).view(numpy.uint8)[:] = raw
        return array
    return _tensor(raw, dtype, shape, map_location if map_location is not None else device)


def _tensor(raw: Any, dtype: str, shape: list[int], device: Any) -> Any:
    import torch

    kind = getattr(torch, dtype.split(".")[-1], None)
    if not isinstance(kind, torch.dtype):
        raise _damaged(f"unknown tensor dtype {dtype!r}")
    tensor = torch.empty(shape, dtype=kind)
    if raw.size:
        tensor.reshape(-1).view(torch.uint8).numpy()[:] = raw
    if str(device) != "cpu":
        tensor = tensor.to(device)
    return tensor


def _build(node: Any, arrays: Any) -> Any:
    """The object a skeleton node describes; ``arrays[i]`` is the i-th array (a list, or
    anything indexable that makes them on demand)."""
    if node is None or isinstance(node, (bool, int, str)):
        return node
    ((tag, value),) = node.items()
    if tag in ("d", "o"):
        pairs = [(_build(k, arrays), _build(v, arrays)) for k, v in value]
        return collections.OrderedDict(pairs) if tag == "o" else dict(pairs)
    if tag in ("l", "t"):
        items = [_build(v, arrays) for v in value]
        return tuple(items) if tag == "t" else items
    return _leaf(tag, value, arrays)


def _leaf(tag: str, value: Any, arrays: Any) -> Any:
    if tag == "a":
        return arrays[value]
    if tag == "f":
        return float.fromhex(value)
    if tag == "y":
        return base64.b64decode(value)
    import torch

    if tag == "dt":
        return getattr(torch, value.split(".")[-1])
    if tag == "dv":
        return torch.device(value)
    raise _damaged(f"unknown skeleton tag {tag!r}")


def _damaged(reason: str) -> CheckpointError:
    return CheckpointError(
        f"damaged rgt.ckpt data file: {reason}",
        fix="load an older checkpoint (load_latest falls back by itself) or restore the file",
    )
