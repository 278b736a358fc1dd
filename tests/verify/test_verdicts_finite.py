"""The byte-level finiteness scan agrees with numpy's isfinite on any array of any float dtype:
NaN with any payload and sign, +-inf, subnormals, huge finite values, in any chunk alignment."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from rgt.agent.verdicts._finite import count_nonfinite

# numpy dtype -> (rgt name, unsigned int of the same width to draw raw bit patterns)
DTYPES = {
    "float16": (np.float16, np.uint16),
    "float32": (np.float32, np.uint32),
    "float64": (np.float64, np.uint64),
}
SPECIAL = {
    "float16": [0x7C00, 0xFC00, 0x7E00, 0x7C01, 0xFFFF, 0x0001, 0x7BFF, 0x8001],
    "float32": [0x7F800000, 0xFF800000, 0x7FC00000, 0x7F800001, 0xFFFFFFFF, 0x1, 0x7F7FFFFF],
    "float64": [
        0x7FF0000000000000,
        0xFFF0000000000000,
        0x7FF8000000000001,
        0x1,
        0x7FEFFFFFFFFFFFFF,
        0xFFFFFFFFFFFFFFFF,
    ],
}


def bit_patterns(name: str) -> st.SearchStrategy[list[int]]:
    width = np.dtype(DTYPES[name][1]).itemsize * 8
    any_bits = st.integers(0, 2**width - 1)
    return st.lists(st.one_of(any_bits, st.sampled_from(SPECIAL[name])), max_size=300)


def agree(name: str, bits: list[int], little: bool = True) -> None:
    floats, ints = DTYPES[name]
    raw = np.array(bits, dtype=ints)
    expected = int((~np.isfinite(raw.view(floats))).sum())
    data = raw.astype(raw.dtype.newbyteorder("<" if little else ">")).tobytes()
    assert count_nonfinite(data, name, little) == expected


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(sorted(DTYPES)), st.data())
def test_agrees_with_numpy(name: str, data: st.DataObject) -> None:
    bits = data.draw(bit_patterns(name))
    agree(name, bits)
    agree(name, bits, little=False)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 2**16 - 1), max_size=300))
def test_bfloat16_agrees_with_float32_of_the_same_high_bits(bits: list[int]) -> None:
    # bfloat16 is the top half of a float32: widen it and ask numpy
    as_f32 = np.array(bits, dtype=np.uint32) << 16
    expected = int((~np.isfinite(as_f32.view(np.float32))).sum())
    data = np.array(bits, dtype="<u2").tobytes()
    assert count_nonfinite(data, "bfloat16") == expected


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(width=32, allow_nan=True, allow_infinity=True), max_size=200))
def test_complex64_counts_each_nonfinite_part(values: list[float]) -> None:
    parts = np.array(values + [0.0] * (len(values) % 2), dtype=np.float32)
    expected = int((~np.isfinite(parts)).sum())
    assert count_nonfinite(parts.tobytes(), "complex64") == expected


def test_float8_kinds() -> None:
    assert count_nonfinite(bytes([0x7F, 0xFF, 0x7E, 0x00]), "float8_e4m3fn") == 2
    assert count_nonfinite(bytes([0x7C, 0xFC, 0x7D, 0x7B]), "float8_e5m2") == 3
