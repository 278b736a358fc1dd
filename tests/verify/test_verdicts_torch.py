"""rgt.agent.verdicts on real files written by torch, safetensors and numpy in the test: weights,
optimizer moments, scheduler and Lightning-like metadata, every float dtype, damage."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from rgt.agent.verdicts import check_file, check_tree


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def adam_state(nan: bool = False) -> dict[str, object]:
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.BatchNorm1d(4))
    optimizer = torch.optim.Adam(model.parameters())
    model(torch.randn(3, 4)).sum().backward()
    optimizer.step()
    state = optimizer.state_dict()
    if nan:
        state["state"][0]["exp_avg"][1, 2] = float("nan")
    return {"model": model.state_dict(), "optimizer": state}


def test_state_dict_and_optimizer_are_ok(tmp_path: Path) -> None:
    torch.save(adam_state(), tmp_path / "ckpt.pt")
    verdict = check_file(tmp_path / "ckpt.pt")
    assert verdict.verdict == "ok", verdict.detail
    assert verdict.detail.startswith(
        "19 tensors"
    )  # 7 of the model, 3 per parameter and "all finite" in verdict.detail
    assert verdict.sha256 == sha(tmp_path / "ckpt.pt")


def test_nan_in_an_optimizer_moment_is_bad_and_named(tmp_path: Path) -> None:
    torch.save(adam_state(nan=True), tmp_path / "ckpt.pt")
    verdict = check_file(tmp_path / "ckpt.pt")
    assert verdict.verdict == "bad"
    assert "optimizer.state.0.exp_avg" in verdict.detail


def test_lightning_like_inf_kth_value_is_metadata(tmp_path: Path) -> None:
    key = "ModelCheckpoint{'monitor': None, 'mode': 'min', 'every_n_train_steps': 0}"
    ckpt = {
        "epoch": 0,
        "global_step": 60,
        "pytorch-lightning_version": "2.6.6",
        "state_dict": {"layer.weight": torch.randn(3, 3)},
        "loops": {"fit_loop": {"state_dict": {}, "epoch_progress": {"total": 1}}},
        "callbacks": {
            key: {
                "kth_value": torch.tensor(float("inf")),
                "best_model_score": None,
                "best_k_models": {},
                "dirpath": "/ckpts",
            },
            "EarlyStopping{'monitor': 'val_loss'}": {"best_score": torch.tensor(float("inf"))},
        },
        "optimizer_states": [{"state": {}, "param_groups": [{"lr": 0.1}]}],
        "lr_schedulers": [{"last_epoch": 3, "_last_lr": [float("inf")]}],
        "hyper_parameters": {"lr": 0.1, "limit": float("inf")},
    }
    torch.save(ckpt, tmp_path / "epoch=0-step=60.ckpt")
    verdict = check_file(tmp_path / "epoch=0-step=60.ckpt")
    assert verdict.verdict == "ok", verdict.detail
    assert "Lightning checkpoint (2.6.6)" in verdict.detail
    assert "inf/NaN in metadata (normal)" in verdict.detail and "kth_value" in verdict.detail
    ckpt["state_dict"]["layer.weight"][0, 0] = float("inf")  # type: ignore[index]
    torch.save(ckpt, tmp_path / "diverged.ckpt")
    bad = check_file(tmp_path / "diverged.ckpt")
    assert bad.verdict == "bad" and "state_dict.layer.weight" in bad.detail


def test_scheduler_and_grad_scaler_state_are_ok(tmp_path: Path) -> None:
    model = torch.nn.Linear(2, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=1.0, total_steps=10)
    torch.save(scheduler.state_dict(), tmp_path / "scheduler.bin")
    torch.save({"scale": float("inf"), "_growth_tracker": 0}, tmp_path / "scaler.pt")
    for name in ("scheduler.bin", "scaler.pt"):
        verdict = check_file(tmp_path / name)
        assert verdict.verdict == "ok", (name, verdict.detail)
        assert verdict.detail.startswith("no tensors")


def test_truncated_and_bit_flipped_files_are_bad(tmp_path: Path) -> None:
    path = tmp_path / "model.pt"
    torch.save({"w": torch.randn(64, 64)}, path)
    good, data = sha(path), bytearray(path.read_bytes())
    (tmp_path / "cut.pt").write_bytes(bytes(data[: len(data) * 2 // 3]))
    assert check_file(tmp_path / "cut.pt").verdict == "bad"
    data[len(data) // 2] ^= 0x10  # inside the storage of w
    path.write_bytes(bytes(data))
    flipped = check_file(path, sha256=good, size=len(data))
    assert flipped.verdict == "bad" and "sha256 mismatch" in flipped.detail
    alone = check_file(path)  # no manifest: the zip member's CRC-32 still catches it
    assert alone.verdict == "bad" and "CRC-32" in alone.detail


@pytest.mark.parametrize(
    "dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.complex64]
)
@pytest.mark.parametrize("bad_value", [float("nan"), float("inf"), float("-inf")])
def test_every_float_dtype_detects_nonfinite(
    tmp_path: Path, dtype: torch.dtype, bad_value: float
) -> None:
    weights = torch.randn(1000).to(dtype)
    torch.save({"w": weights}, tmp_path / "ok.pt")
    assert check_file(tmp_path / "ok.pt").verdict == "ok"
    weights[777] = bad_value
    torch.save({"w": weights}, tmp_path / "bad.pt")
    verdict = check_file(tmp_path / "bad.pt")
    assert verdict.verdict == "bad" and "w" in verdict.detail


def test_huge_finite_values_are_not_mistaken_for_inf(tmp_path: Path) -> None:
    for dtype, big in ((torch.float32, 3.0e38), (torch.bfloat16, 3.0e38), (torch.float64, 1e308)):
        torch.save({"w": torch.full((100,), big, dtype=dtype)}, tmp_path / "big.pt")
        assert check_file(tmp_path / "big.pt").verdict == "ok", dtype


def test_safetensors_with_nan_and_truncated(tmp_path: Path) -> None:
    save_file(
        {"a": torch.randn(4), "b": torch.randn(8, dtype=torch.bfloat16)},
        str(tmp_path / "m.safetensors"),
    )
    assert check_file(tmp_path / "m.safetensors").verdict == "ok"
    save_file({"a": torch.tensor([1.0, float("nan")])}, str(tmp_path / "n.safetensors"))
    nan = check_file(tmp_path / "n.safetensors")
    assert nan.verdict == "bad" and "a" in nan.detail
    data = (tmp_path / "m.safetensors").read_bytes()
    (tmp_path / "m.safetensors").write_bytes(data[:-5])
    assert check_file(tmp_path / "m.safetensors").verdict == "bad"


def test_legacy_torch_format(tmp_path: Path) -> None:
    path = tmp_path / "legacy.pt"
    torch.save(adam_state(), path, _use_new_zipfile_serialization=False)
    assert check_file(path).verdict == "ok", check_file(path).detail
    torch.save(adam_state(nan=True), path, _use_new_zipfile_serialization=False)
    assert check_file(path).verdict == "bad"
    data = path.read_bytes()
    path.write_bytes(data[:-100])
    assert check_file(path).verdict == "bad"


def test_numpy_inline_arrays_in_a_pickle(tmp_path: Path) -> None:
    import pickle

    (tmp_path / "a.pkl").write_bytes(pickle.dumps({"rng": np.random.get_state(), "x": np.ones(3)}))
    assert check_file(tmp_path / "a.pkl").verdict == "ok"
    (tmp_path / "b.pkl").write_bytes(pickle.dumps({"preds": np.array([1.0, np.nan])}))
    assert check_file(tmp_path / "b.pkl").verdict == "bad"


def test_hf_checkpoint_folder_is_one_unit_and_index_shards_must_exist(tmp_path: Path) -> None:
    folder = tmp_path / "out" / "checkpoint-20"
    folder.mkdir(parents=True)
    (folder / "trainer_state.json").write_text('{"best_metric": NaN, "log_history": []}')
    save_file({"w": torch.randn(2)}, str(folder / "model-00001-of-00002.safetensors"))
    save_file({"v": torch.randn(2)}, str(folder / "model-00002-of-00002.safetensors"))
    shards = {"w": "model-00001-of-00002.safetensors", "v": "model-00002-of-00002.safetensors"}
    index = json.dumps({"metadata": {}, "weight_map": shards})
    (folder / "model.safetensors.index.json").write_text(index)
    torch.save(adam_state()["optimizer"], folder / "optimizer.pt")
    tree = check_tree(tmp_path)
    (unit,) = tree.units
    assert (unit.path, unit.layout, unit.verdict, unit.files) == (
        "out/checkpoint-20",
        "hf-trainer",
        "ok",
        5,
    )
    assert all(f.unit == "out/checkpoint-20" for f in tree.files)
    (folder / "model-00002-of-00002.safetensors").unlink()
    (unit,) = check_tree(tmp_path).units
    assert unit.verdict == "bad" and "absent shard" in unit.detail


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float64])
def test_nan_past_the_first_read_chunk_is_found(tmp_path: Path, dtype: torch.dtype) -> None:
    from rgt.agent.verdicts._stream import CHUNK

    weights = torch.zeros(CHUNK // 2 + 3, dtype=dtype)  # more than one read of either dtype
    weights[-1] = float("nan")
    torch.save({"w": weights}, tmp_path / "big.pt", _use_new_zipfile_serialization=False)
    verdict = check_file(tmp_path / "big.pt")
    assert verdict.verdict == "bad" and "w" in verdict.detail


def test_an_empty_log_is_ok_an_empty_checkpoint_is_bad(tmp_path: Path) -> None:
    (tmp_path / "stderr.log").write_bytes(b"")
    (tmp_path / "model.safetensors").write_bytes(b"")
    assert check_file(tmp_path / "stderr.log").verdict == "ok"
    assert check_file(tmp_path / "model.safetensors").verdict == "bad"
