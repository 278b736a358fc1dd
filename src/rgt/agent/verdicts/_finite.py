"""Is every value in a run of raw float bytes finite? Without numpy, at C speed.

A float is NaN or inf exactly when its exponent bits are all ones. The exponent sits in the
high byte (and, for float32/bfloat16/float64, the top bits of the byte below it), so a scan
needs only those bytes: ``chunk[hi::size]`` gathers the high byte of every value (one C loop),
``bytes.translate(None, delete=...)`` drops every byte that cannot start a non-finite value,
and an empty result proves the whole run finite. Only when candidates remain (huge magnitudes
such as 1e38 share the high byte of inf) are the neighbouring bytes consulted, again with
whole-run operations: two translated masks ANDed as big integers.

float16 and the float8 kinds are decided by the high byte alone. Byte order is little-endian
unless the file says otherwise (torch writes a ``byteorder`` record). Complex numbers are pairs
of floats of half their size.
"""

from __future__ import annotations

from typing import Dict, Optional, Tuple, Union

_ALL = bytes(range(256))


def _keep_only(wanted: bytes) -> bytes:
    """The ``delete`` argument of ``bytes.translate`` that keeps only ``wanted`` bytes."""
    return _ALL.translate(None, wanted)


def _mask(predicate_bytes: bytes) -> bytes:
    """A translate table mapping each byte in ``predicate_bytes`` to 1, every other to 0."""
    table = bytearray(256)
    for b in predicate_bytes:
        table[b] = 1
    return bytes(table)


# (size, high-byte candidates, mask for the byte below or None when the high byte decides)
_HIGH_7F = bytes((0x7F, 0xFF))
_HALF_HIGH = bytes(b for b in range(256) if b & 0x7C == 0x7C)
_E4M3_NAN = bytes((0x7F, 0xFF))  # float8_e4m3fn has no inf; NaN is S.1111.111
_ScanSpec = Tuple[int, bytes, Optional[bytes]]
SPECS: Dict[str, _ScanSpec] = {
    "float64": (8, _HIGH_7F, _mask(bytes(b for b in range(256) if b & 0xF0 == 0xF0))),
    "float32": (4, _HIGH_7F, _mask(bytes(range(0x80, 0x100)))),
    "bfloat16": (2, _HIGH_7F, _mask(bytes(range(0x80, 0x100)))),
    "float16": (2, _HALF_HIGH, None),
    "float8_e5m2": (1, _HALF_HIGH, None),
    "float8_e4m3fn": (1, _E4M3_NAN, None),
    "float8_e4m3fnuz": (1, b"\x80", None),  # the "fnuz" kinds: 0x80 is their only NaN
    "float8_e5m2fnuz": (1, b"\x80", None),
}
COMPLEX = {"complex128": "float64", "complex64": "float32", "complex32": "float16"}
_DELETE = {name: _keep_only(spec[1]) for name, spec in SPECS.items()}
_HIGH_MASK = {name: _mask(spec[1]) for name, spec in SPECS.items()}


def scan_dtype(dtype: str) -> Optional[str]:
    """The float kind whose bytes are scanned for ``dtype``, or None (integers, bool: no NaN)."""
    dtype = COMPLEX.get(dtype, dtype)
    return dtype if dtype in SPECS else None


def item_size(dtype: str) -> int:
    return SPECS[COMPLEX.get(dtype, dtype)][0]


def count_nonfinite(chunk: Union[bytes, bytearray], dtype: str, little: bool = True) -> int:
    """How many values of ``dtype`` in ``chunk`` are NaN or +-inf (0 in the common case, fast).

    ``chunk`` holds whole values: its length is a multiple of the item size."""
    name = COMPLEX.get(dtype, dtype)
    size, _, low_mask = SPECS[name]
    hi_at = size - 1 if little else 0
    high = chunk[hi_at::size]
    if not high.translate(None, _DELETE[name]):
        return 0  # the common case: no value can be NaN or inf
    high_hits = high.translate(_HIGH_MASK[name])
    if low_mask is None:
        return high_hits.count(1)
    low_at = size - 2 if little else 1
    low_hits = chunk[low_at::size].translate(low_mask)
    both = int.from_bytes(high_hits, "little") & int.from_bytes(low_hits, "little")
    return int(both.to_bytes(len(high_hits), "little").count(1)) if both else 0
