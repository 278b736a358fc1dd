"""What a format reader learned about a file before its bytes are streamed: the spans to scan,
and what the structure itself holds (tensors by key path, inline arrays, plain floats).

After the stream, ``Plan.judge`` turns it into a verdict and a one-line detail, applying the
non-finite rule of ``_places`` to every finding.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from rgt.agent.verdicts import _finite, _places, _stubs
from rgt.agent.verdicts._records import BAD, OK
from rgt.agent.verdicts._stream import Span

_NUMPY_FLOATS = {
    "f2": "float16",
    "f4": "float32",
    "f8": "float64",
    "c8": "complex64",
    "c16": "complex128",
}


class Plan(object):
    def __init__(self, kind: str, metadata_file: bool = False) -> None:
        self.kind = kind
        self.metadata_file = metadata_file  # the whole file is metadata (scheduler.bin, ...)
        self.spans: List[Span] = []
        self.little = True
        self.tensors = 0
        self.values = 0
        self.numbers = 0
        self.bad_names: List[str] = []  # non-finite in weights: the file is bad
        self.meta_names: List[str] = []  # non-finite in metadata: noted
        self.notes: List[str] = []
        self.corrupt: List[str] = []  # spans whose CRC-32 failed
        self.what = ""  # "Lightning checkpoint", ...
        self.plain = False  # no tensors by nature (JSON, an image): ``what`` says it all

    def finding(self, path: List[str], numel: int) -> None:
        name = ".".join(path) or "<root>"
        meta = self.metadata_file or _places.is_metadata(path, numel)
        (self.meta_names if meta else self.bad_names).append(name)

    def add_tensor(self, path: List[str], numel: int) -> None:
        self.tensors += 1
        self.values += numel

    def census(
        self,
        skeleton: Any,
        spans: Optional[Dict[str, Span]] = None,
        root: List[str] = [],  # noqa: B006
    ) -> None:
        """Walk a pickle's skeleton: tie tensors to their spans, check inline values."""
        for path, leaf in _places.leaves(skeleton, root):
            if isinstance(leaf, _stubs.TensorRef):
                self.add_tensor(path, leaf.numel)
                span = (spans or {}).get(leaf.storage.key)
                if span is not None:
                    span.refs.append((path, leaf.numel))
            elif isinstance(leaf, _stubs.ArrayRef):
                self._array(path, leaf)
            elif isinstance(leaf, _stubs.Scalar):
                self._scalar(path, leaf)
            elif isinstance(leaf, (int, float)) and not isinstance(leaf, bool):
                self.numbers += 1
                if _places.nonfinite_float(leaf):
                    self.finding(path, 1)

    def _array(self, path: List[str], array: _stubs.ArrayRef) -> None:
        kind, little = _numpy_kind(array.dtype)
        raw = array.raw if isinstance(array.raw, (bytes, bytearray)) else b""
        size = _finite.item_size(kind) if kind else 1
        numel = len(raw) // size
        self.add_tensor(path, numel)
        if kind and _finite.count_nonfinite(bytes(raw[: numel * size]), kind, little):
            self.finding(path, numel)

    def _scalar(self, path: List[str], scalar: _stubs.Scalar) -> None:
        kind, little = _numpy_kind(scalar.dtype)
        self.numbers += 1
        if kind and _finite.count_nonfinite(scalar.raw, kind, little):
            self.finding(path, 1)

    def after_stream(self) -> None:
        for span in self.spans:
            if not span.crc_ok:
                self.corrupt.append("storage %s fails its CRC-32 (corrupted bytes)" % span.label)
            if span.nonfinite:
                refs = span.refs or [([span.label], span.length)]
                path, _numel = refs[0]
                meta = all(self.metadata_file or _places.is_metadata(p, n) for p, n in refs)
                (self.meta_names if meta else self.bad_names).append(".".join(path))

    def judge(self) -> Tuple[str, str]:
        """(verdict, detail) once the spans were streamed."""
        self.after_stream()
        if self.corrupt:
            return BAD, self.corrupt[0]
        if self.bad_names:
            return BAD, "non-finite values (NaN or inf) in %d tensor(s): %s" % (
                len(self.bad_names),
                _names(self.bad_names),
            )
        return OK, self._describe()

    def _describe(self) -> str:
        if self.plain:
            return self.what
        parts = [self.what] if self.what else []
        if self.tensors:
            noun = "tensor" if self.tensors == 1 else "tensors"
            parts.append("%d %s, %s values, all finite" % (self.tensors, noun, human(self.values)))
        else:
            parts.append("no tensors: %d numbers" % self.numbers)
        if self.meta_names:
            parts.append("inf/NaN in metadata (normal): " + _names(self.meta_names))
        return "; ".join(parts + self.notes)


def _names(names: List[str]) -> str:
    return ", ".join(names[:3]) + (" …" if len(names) > 3 else "")


def _numpy_kind(dtype: Any) -> Tuple[Optional[str], bool]:
    if not isinstance(dtype, _stubs.DtypeRef):
        return None, True
    typestr = dtype.typestr.lstrip("<>=|")
    return _NUMPY_FLOATS.get(typestr), dtype.order != ">"


def human(n: int) -> str:
    for unit, scale in (("G", 10**9), ("M", 10**6), ("k", 10**3)):
        if n >= scale:
            return "%.1f%s" % (n / scale, unit)
    return str(n)
