"""One sequential read of a file: every byte hashed, every tensor's bytes scanned for NaN/inf.

A format reader first says where the tensors lie (``Span``: file offset, length, dtype, and the
key paths that use it). The file is then read once, front to back, in chunks aligned to each
span, so the sha256 the manifest is compared with and the finiteness scan share one pass over
the bytes. A zip member's CRC-32, when the archive records one, is checked on the same pass:
a flipped bit is caught even without a manifest to compare with.
"""

from __future__ import annotations

import hashlib
import zlib
from typing import Any, BinaryIO, List, Optional, Tuple

from rgt.verdicts import _finite

CHUNK = 8 << 20  # a multiple of every item size


class Span(object):
    """A run of bytes holding one storage's values."""

    def __init__(
        self,
        offset: int,
        length: int,
        dtype: Optional[str],
        label: str,
        crc: Optional[int] = None,
    ) -> None:
        self.offset, self.length, self.dtype, self.label = offset, length, dtype, label
        self.crc = crc
        self.refs: List[Tuple[List[str], int]] = []  # (key path, numel) using it
        self.nonfinite = 0
        self.crc_ok = True


def stream(handle: BinaryIO, size: int, spans: List[Span], little: bool = True) -> str:
    """Hash ``size`` bytes of ``handle`` from offset 0, scanning each span (sorted, disjoint)
    on the way; fills each span's ``nonfinite`` and ``crc_ok``. Returns the sha256 hex."""
    digest = hashlib.sha256()
    handle.seek(0)
    at = 0
    for span in sorted(spans, key=lambda s: s.offset):
        if span.offset < at or span.offset + span.length > size:
            raise ValueError("span %s overlaps another or passes the end" % span.label)
        _hash(handle, span.offset - at, digest)
        _scan(handle, span, digest, little)
        at = span.offset + span.length
    _hash(handle, size - at, digest)
    return digest.hexdigest()


def _hash(handle: BinaryIO, count: int, digest: Any) -> None:
    while count > 0:
        chunk = handle.read(min(CHUNK, count))
        if not chunk:
            raise EOFError("file ended early")
        digest.update(chunk)
        count -= len(chunk)


def _scan(handle: BinaryIO, span: Span, digest: Any, little: bool) -> None:
    kind = _finite.scan_dtype(span.dtype) if span.dtype else None
    step = _finite.item_size(kind) if kind else 1
    crc, left, carry = 0, span.length, b""
    while left > 0:
        chunk = handle.read(min(CHUNK, left))
        if not chunk:
            raise EOFError("file ended early")
        left -= len(chunk)
        digest.update(chunk)
        if span.crc is not None:
            crc = zlib.crc32(chunk, crc)
        if kind:
            data = carry + chunk if carry else chunk
            whole = len(data) - len(data) % step
            span.nonfinite += _finite.count_nonfinite(data[:whole], kind, little)
            carry = data[whole:]
    span.crc_ok = span.crc is None or crc == span.crc
