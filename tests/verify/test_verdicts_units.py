"""Checkpoint folders as units: accelerate's real save_state, torch DCP, DeepSpeed's layout."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import torch

from rgt.agent.verdicts import check_tree


def accelerate_state(folder: Path) -> None:
    from accelerate import Accelerator

    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.BatchNorm1d(4))
    optimizer = torch.optim.AdamW(model.parameters())
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 2)
    accelerator = Accelerator(cpu=True)
    model, optimizer, scheduler = accelerator.prepare(model, optimizer, scheduler)
    model(torch.randn(3, 4)).sum().backward()
    optimizer.step()
    scheduler.step()
    accelerator.save_state(str(folder))


@pytest.mark.slow
def test_accelerate_save_state_is_one_ok_unit(tmp_path: Path) -> None:
    accelerate_state(tmp_path / "out" / "step_60")
    tree = check_tree(tmp_path)
    verdicts = {Path(f.path).name: f for f in tree.files}
    # what `pull` used to call BAD: the RNG states (numpy inside) and a tensorless scheduler
    assert verdicts["random_states_0.pkl"].verdict == "ok", verdicts["random_states_0.pkl"]
    assert verdicts["scheduler.bin"].detail.startswith("no tensors")
    (unit,) = tree.units
    assert (unit.path, unit.layout, unit.verdict) == ("out/step_60", "accelerate", "ok")
    assert unit.files == len(tree.files) == 4 and tree.counts()["ok"] == 4
    (tmp_path / "out" / "step_60" / "model.safetensors").unlink()
    (unit,) = check_tree(tmp_path).units
    assert unit.verdict == "bad" and "no model weights" in unit.detail


def test_dcp_folder_is_complete_only_with_every_shard(tmp_path: Path) -> None:
    import torch.distributed.checkpoint as dcp

    model = torch.nn.Linear(8, 8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "assuming the intent is to save in a single process"
        dcp.save({"model": model.state_dict(), "step": 3}, checkpoint_id=str(tmp_path / "dcp"))
    tree = check_tree(tmp_path)
    (unit,) = tree.units
    assert (unit.layout, unit.verdict, unit.files) == ("dcp", "ok", 2), unit
    shard = next((tmp_path / "dcp").glob("*.distcp"))
    assert next(f for f in tree.files if f.kind == "dcp").detail.startswith("DCP shard")
    data = bytearray(shard.read_bytes())
    shard.write_bytes(bytes(data[: len(data) // 2]))
    (unit,) = check_tree(tmp_path).units
    assert unit.verdict == "bad" and "metadata needs" in unit.detail


def test_deepspeed_latest_must_name_a_tag_with_model_states(tmp_path: Path) -> None:
    folder = tmp_path / "ds"
    (folder / "global_step10").mkdir(parents=True)
    torch.save(
        {"module": {"w": torch.ones(2)}}, folder / "global_step10" / "mp_rank_00_model_states.pt"
    )
    for rank in (0, 1):
        name = f"zero_pp_rank_{rank}_mp_rank_00_optim_states.pt"
        torch.save({"optimizer_state_dict": {"step": 10}}, folder / "global_step10" / name)
    (folder / "latest").write_text("global_step10")
    (unit,) = check_tree(tmp_path).units
    assert (unit.layout, unit.verdict, unit.files) == ("deepspeed", "ok", 4), unit
    (folder / "global_step10" / "zero_pp_rank_0_mp_rank_00_optim_states.pt").unlink()
    (unit,) = check_tree(tmp_path).units
    assert unit.verdict == "bad" and "ranks" in unit.detail
    (folder / "latest").write_text("global_step20")
    (unit,) = check_tree(tmp_path).units
    assert unit.verdict == "bad" and "global_step20" in unit.detail


def test_a_dcp_folder_inside_an_accelerate_unit_must_be_complete(tmp_path: Path) -> None:
    import torch.distributed.checkpoint as dcp

    folder = tmp_path / "step_5"  # accelerate + FSDP: the model as DCP shards
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dcp.save({"w": torch.randn(4)}, checkpoint_id=str(folder / "pytorch_model_fsdp_0"))
    torch.save({"python": 1}, folder / "random_states_0.pkl")
    (unit,) = check_tree(tmp_path).units
    assert (unit.path, unit.layout, unit.verdict) == ("step_5", "accelerate", "ok"), unit
    for shard in (folder / "pytorch_model_fsdp_0").glob("*.distcp"):
        shard.unlink()
    (unit,) = check_tree(tmp_path).units
    assert unit.verdict == "bad" and "pytorch_model_fsdp_0/__0_0.distcp is missing" in unit.detail
