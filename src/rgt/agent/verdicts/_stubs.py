"""The stand-ins a pickle's allowed globals are read as: records of what was saved, no behaviour.

A tensor becomes a ``TensorRef`` to a ``StorageRef`` (which record of the file holds its bytes,
their dtype and count); a numpy array an ``ArrayRef`` holding its raw bytes; a dataclass or
named record (DCP metadata, ``argparse.Namespace``) a ``Record`` with its fields. None of them
imports or calls anything of the machine's.
"""

from __future__ import annotations

import collections
from typing import Any, Callable, Dict, Optional, Tuple

from rgt.agent.verdicts import _allowed
from rgt.agent.verdicts._records import HashOnly


class StorageRef(object):
    """One storage record of a torch file: its key, element dtype and element count."""

    def __init__(self, key: str, dtype: str, numel: int, location: str) -> None:
        self.key, self.dtype, self.numel, self.location = key, dtype, numel, location
        self.scan_as = dtype  # a tensor of another dtype (float8 over untyped bytes) may say

    @property
    def nbytes(self) -> int:
        return self.numel * _allowed.ELEMENT_SIZE.get(self.dtype, 1)


class TensorRef(object):
    def __init__(self, storage: Any, offset: Any, size: Any, dtype: Optional[str] = None) -> None:
        if not isinstance(storage, StorageRef):
            raise HashOnly("a tensor rebuilt from something other than a storage record")
        self.storage, self.offset, self.size = storage, offset, tuple(size or ())
        if dtype is not None and dtype != storage.dtype:
            storage.scan_as = dtype
        self.numel = 1
        for n in self.size:
            self.numel *= int(n)


class ArrayRef(object):
    """A numpy array pickled inline: ``_reconstruct`` then ``__setstate__`` with raw bytes."""

    def __init__(self, *args: Any) -> None:
        self.dtype: Any = None
        self.shape: Tuple[Any, ...] = ()
        self.raw: Any = b""

    def __setstate__(self, state: Any) -> None:
        _, self.shape, self.dtype, _, self.raw = state[:5]


class DtypeRef(object):
    """``numpy.dtype('f8', False, True)`` plus its state: the type string and byte order."""

    def __init__(self, typestr: Any = "", *args: Any) -> None:
        self.typestr, self.order = str(typestr), "|"

    def __setstate__(self, state: Any) -> None:
        if isinstance(state, tuple) and len(state) > 1 and isinstance(state[1], str):
            self.order = state[1]


class Record(object):
    """A named record: constructor arguments and the state a BUILD gave it."""

    qualname = "record"
    args: Tuple[Any, ...] = ()
    state: Any = None

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        self = object.__new__(cls)
        self.args, self.state = args, None
        return self

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __setstate__(self, state: Any) -> None:
        self.state = state

    def fields(self) -> Dict[str, Any]:
        """The record's named fields (a dataclass's ``__dict__``, or slots' state)."""
        state = self.state
        if isinstance(state, tuple) and len(state) == 2:
            merged = dict(state[0] or {})
            merged.update(state[1] or {})
            return merged
        return dict(state) if isinstance(state, dict) else {}


class DictRecord(dict):  # type: ignore[type-arg]
    qualname = "dict"

    def __setstate__(self, state: Any) -> None:
        if isinstance(state, dict):
            self.update(state)


class Scalar(object):
    def __init__(self, dtype: Any = None, raw: Any = b"") -> None:
        self.dtype, self.raw = dtype, raw if isinstance(raw, bytes) else b""


class TorchDtype(str):
    """``torch.float32`` as the canonical dtype name."""


class StorageType(str):
    """``torch.FloatStorage`` as the dtype of its elements."""


def _encode(text: Any, encoding: str = "utf-8") -> bytes:
    # protocol 2 writes bytes as _codecs.encode(str, "latin1"); nothing else is data
    if not isinstance(text, str) or encoding.lower() not in ("latin1", "latin-1"):
        raise HashOnly("_codecs.encode with %r: not how pickle stores bytes" % encoding)
    return text.encode("latin1")


def _bytearray(data: Any = b"", *args: Any) -> bytearray:
    if isinstance(data, bytes) and not args:
        return bytearray(data)
    raise HashOnly("bytearray(...) with arguments that are not bytes")


def _rebuild(storage: Any, offset: Any, size: Any, *rest: Any) -> TensorRef:
    dtype = rest[3] if len(rest) > 3 and isinstance(rest[3], TorchDtype) else None
    return TensorRef(storage, offset, size, dtype)


def _rebuild_parameter(data: Any, *rest: Any) -> Any:
    return data


def _rebuild_from_type(func: Any, kind: Any, args: Any, state: Any) -> Any:
    if func not in (_rebuild, _rebuild_parameter):
        raise HashOnly("a tensor subclass rebuilt by something other than a storage")
    return func(*args)


def _path(*parts: Any) -> str:
    return "/".join(str(p) for p in parts)


_RECORD_CLASSES: Dict[str, type] = {}


def _record_class(name: str, base: type = Record) -> type:
    if name not in _RECORD_CLASSES:
        _RECORD_CLASSES[name] = type(name.rsplit(".", 1)[-1], (base,), {"qualname": name})
    return _RECORD_CLASSES[name]


_FIXED: Dict[str, Callable[..., Any]] = {
    "_codecs.encode": _encode,
    "builtins.bytearray": _bytearray,
    "builtins.set": set,
    "builtins.frozenset": frozenset,
    "builtins.complex": complex,
    "builtins.slice": slice,
    "collections.OrderedDict": collections.OrderedDict,
    "numpy.dtype": DtypeRef,
    "torch._utils._rebuild_parameter": _rebuild_parameter,
    "torch._utils._rebuild_parameter_with_state": _rebuild_parameter,
    "torch._tensor._rebuild_from_type_v2": _rebuild_from_type,
}


def stub_for(name: str) -> Optional[Any]:
    """The stand-in for an allowed global, or None."""
    if not _allowed.is_data(name):
        return None
    if name in _FIXED:
        return _FIXED[name]
    if name in _allowed.TORCH_DTYPES:
        return TorchDtype(_allowed.TORCH_DTYPES[name])
    if name in _allowed.STORAGES:
        return StorageType(_allowed.STORAGES[name])
    if name in _allowed.TENSOR_REBUILDERS:
        return _rebuild
    if name in _allowed.NUMPY_ARRAYS:
        return ArrayRef
    if name in _allowed.NUMPY_SCALARS:
        return Scalar
    if name in _allowed.PATHS:
        return _path
    if name in _allowed.DICTS:
        return _record_class(name, DictRecord)
    return _record_class(name)
