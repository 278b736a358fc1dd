"""Damaged or crafted structure never crashes the verifier and never runs anything: every byte
flip of a torch file's pickle, of a bare pickle and of a safetensors header gives a verdict."""

from __future__ import annotations

import io
import pickle
import zipfile
from pathlib import Path

import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rgt.agent.verdicts import VERDICTS, check_file

flips = st.lists(st.tuples(st.integers(0, 10**6), st.integers(1, 255)), min_size=1, max_size=4)


def flipped(data: bytes, changes: list[tuple[int, int]]) -> bytes:
    out = bytearray(data)
    for at, mask in changes:
        out[at % len(out)] ^= mask
    return bytes(out)


def torch_file(tmp: Path) -> tuple[dict[str, bytes], str]:
    torch.save({"w": torch.randn(3), "opt": {"state": {0: {"exp_avg": torch.ones(2)}}}}, tmp)
    with zipfile.ZipFile(tmp) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    return members, next(n for n in members if n.endswith("data.pkl"))


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(changes=flips)
def test_a_flipped_data_pkl_gets_a_verdict(tmp_path: Path, changes: list[tuple[int, int]]) -> None:
    members, name = torch_file(tmp_path / "good.pt")
    members[name] = flipped(members[name], changes)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for member, data in members.items():
            archive.writestr(member, data)
    (tmp_path / "x.pt").write_bytes(buffer.getvalue())
    assert check_file(tmp_path / "x.pt").verdict in VERDICTS


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(changes=flips, protocol=st.integers(2, 5))
def test_a_flipped_bare_pickle_gets_a_verdict(
    tmp_path: Path, changes: list[tuple[int, int]], protocol: int
) -> None:
    data = pickle.dumps({"a": [1.5, float("inf")], "b": {"c": (1, "x")}, "d": {3, 4}}, protocol)
    (tmp_path / "x.pkl").write_bytes(flipped(data, changes))
    assert check_file(tmp_path / "x.pkl").verdict in VERDICTS


def test_a_huge_length_field_is_bad_without_allocating_it(tmp_path: Path) -> None:
    # BINUNICODE8 claiming 1 TiB of text in a 14-byte file (found by the fuzz test above)
    (tmp_path / "x.pkl").write_bytes(b"\x80\x04\x8d" + (2**40).to_bytes(8, "little") + b"abc")
    torch.save({"w": torch.ones(1)}, tmp_path / "y.pt", _use_new_zipfile_serialization=False)
    data = bytearray((tmp_path / "y.pt").read_bytes())
    data[2:3] = b"\x8d" + (2**40).to_bytes(8, "little")  # the legacy header's first pickle
    (tmp_path / "y.pt").write_bytes(bytes(data))
    for name in ("x.pkl", "y.pt"):
        assert check_file(tmp_path / name).verdict == "bad"


def test_a_compressed_data_pkl_larger_than_its_archive_is_bad(tmp_path: Path) -> None:
    with zipfile.ZipFile(tmp_path / "bomb.pt", "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("bomb/data.pkl", b"\x80\x02(" + b"N" * 20_000_000 + b"l.")
    verdict = check_file(tmp_path / "bomb.pt")
    assert verdict.verdict == "bad" and "zip bomb" in verdict.detail
