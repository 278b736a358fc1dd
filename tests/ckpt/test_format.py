"""The format 2 data file: exact round trip, one hash pass, legacy files, verify and export."""

from __future__ import annotations

import collections
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy
import pytest
import torch
import xxhash

from rgt.ckpt import Checkpointer, load_data_file, state_digest
from rgt.ckpt._format import parse, plan
from rgt.ckpt._store import CheckpointFallbackWarning
from rgt.ckpt.export import export
from rgt.errors import CheckpointError
from rgt.verify.artifacts import verify_file


def rich_state() -> dict[object, object]:
    """Everything a training state holds, including the types a lossy format would change."""
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    return {
        "model": collections.OrderedDict(
            [("w", base), ("w_t", base.t()), ("half", base.to(torch.bfloat16)), ("b", base[1])]
        ),
        "optimizer": {
            "state": {0: {"step": torch.tensor(3.0), "exp_avg": torch.randn(5)}},
            "param_groups": [{"lr": 1e-3, "betas": (0.9, 0.999), "params": [0]}],
        },
        "flags": torch.tensor([True, False]),
        "empty": torch.empty(0, 3),
        "scalar": torch.tensor(7, dtype=torch.int64),
        "complex": torch.tensor([1 + 2j], dtype=torch.complex64),
        "numpy": numpy.arange(6, dtype=numpy.int16).reshape(2, 3),
        "floats": [float("nan"), float("inf"), -0.0, 1 / 3],
        "misc": (None, True, 2**70, "ü $(x)", b"\x00\xff", torch.float16, torch.device("cpu")),
        "rng": torch.get_rng_state(),
    }


def raw(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.contiguous().reshape(-1).view(torch.uint8)


def assert_same(a: object, b: object) -> None:
    assert type(a) is type(b), (type(a), type(b))
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape
        assert torch.equal(raw(a), raw(b))
    elif isinstance(a, numpy.ndarray):
        assert isinstance(b, numpy.ndarray) and a.dtype == b.dtype and (a == b).all()
    elif isinstance(a, dict):
        assert isinstance(b, dict) and list(a) == list(b)
        for key in a:
            assert_same(a[key], b[key])
    elif isinstance(a, list | tuple):
        assert isinstance(b, list | tuple) and len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            assert_same(x, y)
    elif isinstance(a, float):
        assert isinstance(b, float) and a.hex() == b.hex()
    else:
        assert a == b


def test_round_trip_keeps_types_order_and_bits(tmp_path: Path) -> None:
    state = rich_state()
    info = Checkpointer(tmp_path).save(state, 1)
    assert info.path.endswith(".rgt")
    loaded = Checkpointer(tmp_path).load_latest()
    assert_same(state, loaded)
    assert state_digest(loaded) == state_digest(state) == info.state_digest


def test_one_hash_pass_gives_the_file_hash_and_the_state_digest(tmp_path: Path) -> None:
    state = rich_state()
    info = Checkpointer(tmp_path).save(state, 1)
    data = Path(info.path).read_bytes()
    layout = plan(state)
    assert len(data) == layout.total == info.bytes
    # XXH3-128 computed here by the xxhash package itself, tagged with its name.
    assert info.file_hash == "xxh3_128:" + xxhash.xxh3_128(data).hexdigest()
    # The file begins with the canonical stream that state_digest hashes.
    stream = data[: layout.stream_bytes]
    assert info.state_digest == "xxh3_128:" + xxhash.xxh3_128(stream).hexdigest()
    assert state_digest(state, "sha256") == hashlib.sha256(stream).hexdigest()


def test_without_xxhash_new_checkpoints_fall_back_to_sha256(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "xxhash", None)  # import xxhash now raises ImportError
    state = rich_state()
    info = Checkpointer(tmp_path).save(state, 1)
    data = Path(info.path).read_bytes()
    assert info.file_hash == hashlib.sha256(data).hexdigest()
    assert info.state_digest == state_digest(state) == state_digest(state, "sha256")
    assert_same(state, Checkpointer(tmp_path).load_latest())


def test_an_xxh3_checkpoint_without_xxhash_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    Checkpointer(tmp_path).save(rich_state(), 1)
    monkeypatch.setitem(sys.modules, "xxhash", None)
    with pytest.raises(CheckpointError, match="xxhash") as caught:
        Checkpointer(tmp_path).load_latest()
    assert "pip install xxhash" in caught.value.fix


def test_format_2_records_with_a_bare_sha256_still_verify(tmp_path: Path) -> None:
    state = rich_state()
    info = Checkpointer(tmp_path).save(state, 3)
    raw = Path(info.path).read_bytes()
    record = json.loads(Path(info.record).read_text())
    del record["hash"]
    record.update(format="rgt.ckpt/2", sha256=hashlib.sha256(raw).hexdigest())
    Path(info.record).write_text(json.dumps(record))
    ckpt = Checkpointer(tmp_path)
    assert_same(state, ckpt.load_latest())
    assert ckpt.loaded is not None and ckpt.loaded.file_hash == record["sha256"]
    Path(info.path).write_bytes(raw[:-1] + bytes([raw[-1] ^ 1]))  # one flipped bit
    with (
        pytest.warns(CheckpointFallbackWarning, match="sha256 mismatch"),
        pytest.raises(CheckpointError, match="none of the 1 committed"),
    ):
        Checkpointer(tmp_path).load_latest()


@pytest.mark.parametrize("cut", [1, 17, 4096, -1])
def test_damaged_files_raise_a_checkpoint_error(tmp_path: Path, cut: int) -> None:
    info = Checkpointer(tmp_path).save(rich_state(), 1)
    data = Path(info.path).read_bytes()
    damaged = data[:cut] if cut > 0 else data[:-9] + b"X" * 9
    with pytest.raises(CheckpointError, match="damaged"):
        parse(damaged)


def test_legacy_torch_save_directories_still_load(tmp_path: Path) -> None:
    state = {"w": torch.randn(3, 3), "step": 4}
    data_file = tmp_path / "ckpt-000000000004-old.pt"
    torch.save(state, data_file)
    raw = data_file.read_bytes()
    record = {
        "format": "rgt.ckpt/1",
        "step": 4,
        "metric": None,
        "time": 1.0,
        "file": data_file.name,
        "bytes": len(raw),
        "sha256": hashlib.sha256(raw).hexdigest(),
        "state_digest": state_digest(state),
    }
    (tmp_path / "ckpt-000000000004.json").write_text(json.dumps(record))
    ckpt = Checkpointer(tmp_path)
    loaded = ckpt.load_latest()
    assert torch.equal(loaded["w"], state["w"]) and ckpt.loaded and ckpt.loaded.step == 4
    ckpt.save({**state, "step": 5}, 5)  # a new-format save next to the old one
    assert Checkpointer(tmp_path).load_latest()["step"] == 5


def test_rgt_verify_load_checks_data_files(tmp_path: Path) -> None:
    ckpt = Checkpointer(tmp_path / "ckpt")
    info = ckpt.save({**rich_state(), "floats": [1.0, -0.0]}, 1)
    check = verify_file(Path(info.path))
    assert check.ok and check.kind == "rgt.ckpt", check.detail
    assert "all finite" in check.detail
    diverged = ckpt.save({"w": torch.tensor([1.0, float("nan")])}, 2)
    bad = verify_file(Path(diverged.path))
    assert not bad.ok and "non-finite" in bad.detail
    raw = bytearray(Path(diverged.path).read_bytes())
    raw[len(raw) // 3] ^= 1
    Path(diverged.path).write_bytes(bytes(raw))
    flipped = verify_file(Path(diverged.path))
    assert not flipped.ok and "commit record" in flipped.detail


def test_rich_state_with_nan_is_flagged_but_loads(tmp_path: Path) -> None:
    info = Checkpointer(tmp_path).save(rich_state(), 1)
    assert "nan" in repr(load_data_file(info.path)["floats"])
    assert not verify_file(Path(info.path)).ok  # a NaN float in the state is a finding


def exportable() -> dict[str, object]:
    return {
        "model": {"0.weight": torch.randn(4, 4), "0.bias": torch.randn(4)},
        "optimizer": {"state": {0: {"exp_avg": torch.randn(4, 4)}}, "param_groups": [{"lr": 0.1}]},
        "epoch": 3,
    }


@pytest.mark.parametrize("fmt", ["torch", "safetensors"])
def test_export_round_trip(tmp_path: Path, fmt: str) -> None:
    state = exportable()
    Checkpointer(tmp_path / "ckpt").save(state, 9)
    done = export(tmp_path / "ckpt", tmp_path / "out.file", fmt)
    assert done.step == 9 and done.tensors == 3
    if fmt == "torch":
        loaded = torch.load(tmp_path / "out.file", weights_only=True)
        assert state_digest(loaded) == state_digest(state)
        return
    from safetensors import safe_open

    with safe_open(str(tmp_path / "out.file"), framework="pt") as handle:
        assert torch.equal(handle.get_tensor("model.0.weight"), state["model"]["0.weight"])  # type: ignore[index]
        exp_avg = handle.get_tensor("optimizer.state.0.exp_avg")
        values = json.loads(handle.metadata()["rgt.values"])
    assert torch.equal(exp_avg, state["optimizer"]["state"][0]["exp_avg"])  # type: ignore[index]
    assert values == {"optimizer.param_groups.0.lr": 0.1, "epoch": 3}


@pytest.mark.slow
def test_export_cli_in_a_hostile_directory(tmp_path: Path) -> None:
    hostile = tmp_path / "it's ü $(touch PWNED)"
    state = exportable()
    Checkpointer(hostile / "ckpt").save(state, 9)
    target = hostile / "exported.pt"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "rgt.cli",
            "ckpt",
            "export",
            str(hostile / "ckpt"),
            "-o",
            str(target),
            "--json",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["step"] == 9 and report["bytes"] == os.path.getsize(target)
    assert state_digest(torch.load(target, weights_only=True)) == state_digest(state)
    assert not (tmp_path / "PWNED").exists()


def test_export_of_an_empty_directory_names_the_fix(tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "rgt.cli",
            "ckpt",
            "export",
            str(tmp_path),
            "-o",
            str(tmp_path / "x.pt"),
        ],
        capture_output=True,
        text=True,
    )
    assert (
        proc.returncode == 1 and "no verified checkpoint" in proc.stderr and "fix:" in proc.stderr
    )
