"""An FSDP2 training job for ``torchrun`` under ``rgt run`` (gloo, CPU), saving a sharded
checkpoint after every step (asynchronously) and resuming from the newest committed one.

Environment: ``SHARD_STEPS`` (steps in all), ``SHARD_KILLS`` (``attempt:step:rank:phase,...``:
in that attempt the rank stops at that step, ``phase`` "step" before the save or "save" right
after it returned with the write in flight, writes its pid to ``victim-<attempt>.pid`` and waits
for the test's ``kill -9``). Each rank adds its own noise from the global RNG (so resuming needs
every rank's RNG back) and trains on its own batch.

Writes to ``RGT_OUTPUT_DIR``: ``losses-rank<R>.txt`` (``attempt step loss-hex`` per step),
``resumes.txt`` (rank 0: ``attempt newest-committed loaded`` for each start that found a
checkpoint) and at the end ``final.txt`` (rank 0: SHA-256 of every parameter and optimizer
tensor, gathered whole).
"""

from __future__ import annotations

import hashlib
import os
import time
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

from rgt.ckpt import ShardedCheckpointer


def build(world: int) -> tuple[nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 33), nn.Tanh(), nn.Linear(33, 4))
    mesh = init_device_mesh("cpu", (world,))
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model, torch.optim.Adam(model.parameters(), lr=0.01)


def state_of(model: nn.Module, opt: torch.optim.Optimizer, step: int) -> dict[str, Any]:
    return {
        "model": model.state_dict(),
        "optim": get_optimizer_state_dict(model, opt),
        "step": step,
        "rng": torch.get_rng_state(),
    }


def resume(ckpt: ShardedCheckpointer, model: nn.Module, opt: torch.optim.Optimizer) -> int:
    """The step to continue after (0 on a fresh start); rank 0 notes what it found."""
    newest = ckpt.latest_info()
    state = state_of(model, opt, 0)
    info = ckpt.load_latest(state)
    if info is None:
        return 0
    set_optimizer_state_dict(model, opt, state["optim"])
    torch.set_rng_state(state["rng"])
    if dist.get_rank() == 0:
        line = f"{os.environ.get('RGT_ATTEMPT', '?')} {newest.step if newest else -1} {info.step}"
        _append("resumes.txt", line)
    return int(state["step"])


def victim(step: int, phase: str) -> None:
    """Stop here and wait for the kill -9 when this attempt, step and rank were drawn."""
    attempt, rank = os.environ.get("RGT_ATTEMPT", "1"), dist.get_rank()
    for kill in filter(None, os.environ.get("SHARD_KILLS", "").split(",")):
        at, at_step, at_rank, at_phase = kill.split(":")
        if (at, int(at_step), int(at_rank), at_phase) == (attempt, step, rank, phase):
            out = Path(os.environ["RGT_OUTPUT_DIR"])
            (out / f"victim-{attempt}.tmp").write_text(str(os.getpid()))
            os.replace(out / f"victim-{attempt}.tmp", out / f"victim-{attempt}.pid")
            time.sleep(600)


def train(model: nn.Module, opt: torch.optim.Optimizer, step: int) -> float:
    gen = torch.Generator().manual_seed(1000 * step + dist.get_rank())  # this rank's batch
    x, y = torch.randn(8, 16, generator=gen), torch.randn(8, 4, generator=gen)
    x = x + 0.1 * torch.randn(x.shape)  # this rank's own RNG stream
    loss = nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    return float(loss)


def main() -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    model, opt = build(dist.get_world_size())
    torch.manual_seed(100 + rank)
    ckpt = ShardedCheckpointer.from_env(asynchronous=True, keep_last=3, commit_timeout_s=60)
    done, steps = resume(ckpt, model, opt), int(os.environ["SHARD_STEPS"])
    for step in range(done + 1, steps + 1):
        loss = train(model, opt, step)
        _append(f"losses-rank{rank}.txt", f"{os.environ['RGT_ATTEMPT']} {step} {loss.hex()}")
        print(f"rank {rank} step {step} loss {loss:.6f}", flush=True)  # the log stays alive
        victim(step, "step")
        ckpt.save(state_of(model, opt, step), step)
        victim(step, "save")
    ckpt.wait()
    final = state_of(model, opt, steps)
    digest = _digest(final)
    if rank == 0:
        _append("final.txt", digest)
    dist.barrier()
    dist.destroy_process_group()


def _digest(state: dict[str, Any]) -> str:
    hasher = hashlib.sha256()
    tensors = list(state["model"].items()) + [
        (f"{name}.{slot}", value)
        for name, slots in state["optim"]["state"].items()
        for slot, value in slots.items()
    ]
    for name, value in tensors:
        whole = value.full_tensor() if hasattr(value, "full_tensor") else value
        hasher.update(name.encode() + whole.detach().contiguous().numpy().tobytes())
    return hasher.hexdigest()


def _append(name: str, line: str) -> None:
    with open(Path(os.environ["RGT_OUTPUT_DIR"]) / name, "a", encoding="utf-8") as handle:
        handle.write(line + "\n")


if __name__ == "__main__":
    main()
    # Done and the group destroyed: leave without torch's C++ teardown, where a gloo thread
    # still joinable now and then aborts a finished rank ("terminate called without an active
    # exception", SIGABRT) and turns a completed run into a failed one. Not what this job tests.
    os._exit(0)
