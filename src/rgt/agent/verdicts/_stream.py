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
from typing import BinaryIO, List, Optional, Tuple

from rgt.agent.verdicts import _finite

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
    reader = _Reader(handle)
    handle.seek(0)
    at = 0
    for span in sorted(spans, key=lambda s: s.offset):
        if span.offset < at or span.offset + span.length > size:
            raise ValueError("span %s overlaps another or passes the end" % span.label)
        reader.skip(span.offset - at)
        reader.scan(span, little)
        at = span.offset + span.length
    reader.skip(size - at)
    return reader.digest.hexdigest()


class _Reader(object):
    """Reads into one reusable buffer (no fresh memory per chunk: at GB sizes the page faults
    of new buffers cost as much as the hash) and feeds it to sha256 through a memoryview."""

    def __init__(self, handle: BinaryIO) -> None:
        self.handle = handle
        self.buffer = bytearray(CHUNK)
        self.view = memoryview(self.buffer)
        self.digest = hashlib.sha256()

    def _read(self, count: int) -> int:
        got = self.handle.readinto(self.view[:count])  # type: ignore[attr-defined]
        if not got:
            raise EOFError("file ended early")
        self.digest.update(self.view[:got])
        return int(got)

    def skip(self, count: int) -> None:
        while count > 0:
            count -= self._read(min(CHUNK, count))

    def scan(self, span: Span, little: bool) -> None:
        kind = _finite.scan_dtype(span.dtype) if span.dtype else None
        step = _finite.item_size(kind) if kind else 1
        left, crc, carry = span.length, 0, b""
        while left > 0:
            got = self._read(min(CHUNK, left))
            left -= got
            if span.crc is not None:
                crc = zlib.crc32(self.view[:got], crc)
            if kind:
                data = self.buffer if got == CHUNK and not carry else carry + self.view[:got]
                whole = len(data) - len(data) % step
                whole_values = data[:whole] if whole < len(data) else data
                span.nonfinite += _finite.count_nonfinite(whole_values, kind, little)
                carry = bytes(data[whole:])
        span.crc_ok = span.crc is None or crc == span.crc
