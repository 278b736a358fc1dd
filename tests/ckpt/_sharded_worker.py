"""Rank processes for the sharded-checkpoint tests (``torch.multiprocessing.spawn``, gloo, CPU).

A small FSDP2 model (``fully_shard`` on every Linear, then the root) with Adam; its state is
``{"model": model.state_dict(), "optim": get_optimizer_state_dict(...), "step", "rng"}``, the
DTensors of every rank's own slice. ``full_state`` gathers the whole tensors, for comparing a
save on one world size with a load on another.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.checkpoint.state_dict import (
    get_optimizer_state_dict,
    set_optimizer_state_dict,
)
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

from rgt.ckpt import ShardedCheckpointer, _persist
from rgt.errors import CheckpointError


def init(rank: int, world: int, port: int) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)


def build(world: int, seed: int) -> tuple[nn.Module, torch.optim.Optimizer]:
    """The model (odd sizes: uneven shards) sharded over ``world`` ranks, or plain at 0."""
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(6, 11), nn.Tanh(), nn.Linear(11, 5), nn.Tanh(), nn.Linear(5, 3))
    if world:
        mesh = init_device_mesh("cpu", (world,))
        for layer in model:
            if isinstance(layer, nn.Linear):
                fully_shard(layer, mesh=mesh)
        fully_shard(model, mesh=mesh)
    return model, torch.optim.Adam(model.parameters(), lr=0.01)


def train_step(model: nn.Module, opt: torch.optim.Optimizer, step: int) -> float:
    gen = torch.Generator().manual_seed(1000 + step)  # the same batch on every rank
    x, y = torch.randn(8, 6, generator=gen), torch.randn(8, 3, generator=gen)
    loss = nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    return float(loss)


def state_of(model: nn.Module, opt: torch.optim.Optimizer, step: int) -> dict[str, Any]:
    return {
        "model": model.state_dict(),
        "optim": get_optimizer_state_dict(model, opt),
        "step": step,
        "rng": torch.get_rng_state(),
    }


def full_state(state: dict[str, Any]) -> dict[str, Any]:
    """Every tensor whole (DTensors gathered), as a flat {name: tensor or value}."""
    out: dict[str, Any] = {}
    for name, value in state["model"].items():
        out["model." + name] = _full(value)
    for name, slots in state["optim"]["state"].items():
        for slot, value in slots.items():
            out[f"optim.{name}.{slot}"] = _full(value)
    out["step"] = state["step"]
    return out


def _full(value: Any) -> Any:
    return value.full_tensor() if hasattr(value, "full_tensor") else value.clone()


def save_run(rank: int, world: int, port: int, directory: str, out: str, crash: int) -> None:
    """Steps 1..3, a save after each (asynchronous); with ``crash``, rank 1 is SIGKILLed at
    step 3 once its shard's data file is on disk but before its shard record."""
    init(rank, world, port)
    model, opt = build(world, seed=0)
    ckpt = ShardedCheckpointer(directory, asynchronous=True, keep_last=2, commit_timeout_s=5)
    for step in (1, 2, 3):
        train_step(model, opt, step)
        state = state_of(model, opt, step)
        full = full_state(state)
        if rank == 0:
            torch.save(full, f"{out}/full-{step}.pt")
        if crash and step == 3 and rank == 1:
            _persist.hold = _kill_at("written")
        ckpt.save(state, step)
        if crash and step == 3 and rank == 0:
            _report_commit_failure(ckpt, out)
        ckpt.wait()
        dist.barrier()
    dist.destroy_process_group()


def _kill_at(stage: str) -> Any:
    def hold(name: str) -> None:
        if name == stage:
            os.kill(os.getpid(), signal.SIGKILL)

    return hold


def _report_commit_failure(ckpt: ShardedCheckpointer, out: str) -> None:
    try:
        ckpt.wait()
        message = "committed"
    except CheckpointError as exc:
        message = str(exc)
    Path(out, "rank0-commit.txt").write_text(message)
    os._exit(0)  # rank 1 is dead: no barrier or group teardown would ever return


def load_run(rank: int, world: int, port: int, directory: str, out: str) -> None:
    """Load the newest step into a freshly initialised model sharded over ``world`` ranks (0:
    plain tensors, no process group) and write the whole tensors it got."""
    if world:
        init(rank, world, port)
    model, opt = build(world, seed=123)
    train_step(model, opt, 0)  # the optimizer's state exists (its values are overwritten)
    ckpt = ShardedCheckpointer(directory)
    state = state_of(model, opt, 0)
    info = ckpt.load_latest(state)
    assert info is not None
    set_optimizer_state_dict(model, opt, state["optim"])
    state = state_of(model, opt, state["step"])
    full = full_state(state)
    if rank == 0:
        torch.save(full, f"{out}/loaded-{max(world, 1)}.pt")
        Path(out, f"info-{max(world, 1)}.json").write_text(json.dumps({"step": info.step}))
    if world:
        dist.destroy_process_group()
