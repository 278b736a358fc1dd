"""FSDP2 training under ``torchrun`` with rgt's sharded checkpoints (tools/gpu_check steps 2-3).

Every ``GC_SAVE_EVERY`` steps each rank saves its shard asynchronously
(``ShardedCheckpointer.save``); a start that finds a committed step resumes from it
(``load_latest``: model, optimizer, step and every rank's RNG states). ``GC_STEPS`` steps in all.

``GC_KILL=attempt:step:rank``: in that attempt (``RGT_ATTEMPT``), once ``step`` is committed
(rank 0's manifest names every rank's shard), that rank writes its pid to
``victim-<attempt>.pid`` and waits for the check's ``kill -9``. ``GC_VERIFY=1``: at the end,
load the newest step into a freshly built model and optimizer and compare every tensor with the
trained ones.

Writes to ``RGT_OUTPUT_DIR``: ``losses-rank<R>.txt`` (``attempt step loss-hex``),
``saves-rank<R>.txt`` (``attempt step blocking-seconds``), ``resumes.txt`` (rank 0: ``attempt
newest-committed loaded``), and from rank 0 at the end ``final.txt`` (SHA-256 of every parameter
and optimizer tensor, gathered whole), ``final-weights.pt`` (those tensors) and ``info.json``.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any

import _model
import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.checkpoint.state_dict import (
    get_optimizer_state_dict,
    set_optimizer_state_dict,
)

from rgt.ckpt import ShardedCheckpointer

OUT = Path(os.environ["RGT_OUTPUT_DIR"])


def state_of(model: nn.Module, opt: torch.optim.Optimizer, step: int) -> dict[str, Any]:
    state = {
        "model": model.state_dict(),
        "optim": get_optimizer_state_dict(model, opt),
        "step": step,
        "rng": torch.get_rng_state(),
    }
    if torch.cuda.is_available() and _model.device().type == "cuda":
        state["cuda_rng"] = torch.cuda.get_rng_state()
    return state


def load(ckpt: ShardedCheckpointer, model: nn.Module, opt: torch.optim.Optimizer) -> Any:
    """The newest committed step into ``model``/``opt`` (RNG states too); None: nothing saved."""
    state = state_of(model, opt, 0)
    info = ckpt.load_latest(state)
    if info is None:
        return None
    set_optimizer_state_dict(model, opt, state["optim"])
    torch.set_rng_state(state["rng"])
    if "cuda_rng" in state:
        torch.cuda.set_rng_state(state["cuda_rng"])
    return info, int(state["step"])


def resume(ckpt: ShardedCheckpointer, model: nn.Module, opt: torch.optim.Optimizer) -> int:
    newest = ckpt.latest_info()
    loaded = load(ckpt, model, opt)
    if loaded is None:
        return 0
    if dist.get_rank() == 0:
        _append("resumes.txt", f"{_attempt()} {newest.step if newest else -1} {loaded[0].step}")
    return int(loaded[1])


def victim(ckpt: ShardedCheckpointer, step: int) -> None:
    """Wait here for the kill -9 when this attempt, step and rank are the drawn ones."""
    spec = os.environ.get("GC_KILL", "")
    if not spec or tuple(spec.split(":")) != (_attempt(), str(step), str(dist.get_rank())):
        return
    ckpt.wait()  # this rank's shard is durable; rank 0 commits once every shard is
    deadline = time.monotonic() + 120
    while _newest(ckpt) != step and time.monotonic() < deadline:
        time.sleep(0.02)
    (OUT / f"victim-{_attempt()}.tmp").write_text(str(os.getpid()))
    os.replace(OUT / f"victim-{_attempt()}.tmp", OUT / f"victim-{_attempt()}.pid")
    print(f"rank {dist.get_rank()} waits for kill -9 after committed step {step}", flush=True)
    time.sleep(600)


def train(ckpt: ShardedCheckpointer, model: nn.Module, opt: torch.optim.Optimizer) -> int:
    rank, steps = dist.get_rank(), int(os.environ["GC_STEPS"])
    for step in range(resume(ckpt, model, opt) + 1, steps + 1):
        loss = _model.train_step(model, opt, step)
        _append(f"losses-rank{rank}.txt", f"{_attempt()} {step} {loss.hex()}")
        print(f"rank {rank} step {step} loss {loss:.6f}", flush=True)
        if ckpt.due(step):
            ckpt.save(state_of(model, opt, step), step)
            _append(f"saves-rank{rank}.txt", f"{_attempt()} {step} {ckpt.last_save_seconds:.6f}")
            victim(ckpt, step)
    ckpt.wait()
    return steps


def verify(ckpt: ShardedCheckpointer, trained: dict[str, torch.Tensor]) -> dict[str, Any]:
    """Load the newest step into a model built from another seed; compare with ``trained``."""
    model, opt = _model.build(seed=1)
    _model.train_step(model, opt, 10_000)  # Adam's moments exist only after a step
    started = time.perf_counter()
    loaded = load(ckpt, model, opt)
    seconds = time.perf_counter() - started
    got = _model.full_tensors(model, get_optimizer_state_dict(model, opt))
    both = [k for k in trained if k in got]
    diffs = {k: float((got[k].double() - trained[k].double()).abs().max()) for k in both}
    return {
        "loaded_step": None if loaded is None else loaded[0].step,
        "load_seconds": seconds,
        "tensors": len(diffs),
        "max_abs_diff": max(diffs.values(), default=0.0),
        "missing": sorted(set(trained) - set(got)),
    }


def main() -> None:
    _model.setup()
    model, opt = _model.build()
    torch.manual_seed(100 + dist.get_rank())  # each rank's own noise stream
    every = int(os.environ.get("GC_SAVE_EVERY", "2"))
    ckpt = ShardedCheckpointer.from_env(every_steps=every, asynchronous=True, keep_last=3)
    steps = train(ckpt, model, opt)
    final = _model.full_tensors(model, get_optimizer_state_dict(model, opt))
    report = verify(ckpt, final) if os.environ.get("GC_VERIFY") == "1" else None
    if dist.get_rank() == 0:
        finish(final, steps, sum(p.numel() for p in model.parameters()), report)
    dist.barrier()
    dist.destroy_process_group()


def finish(final: dict[str, torch.Tensor], steps: int, params: int, report: Any) -> None:
    hasher = hashlib.sha256()
    for name, tensor in final.items():
        raw = tensor.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()
        hasher.update(name.encode() + raw)
    _append("final.txt", hasher.hexdigest())
    torch.save(final, OUT / "final-weights.pt")
    info = {
        "steps": steps,
        "world": dist.get_world_size(),
        "backend": dist.get_backend(),
        "device": _device_name(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "state_bytes": _model.state_bytes(final),
        "params": params,
        "verify": report,
    }
    (OUT / "info.json").write_text(json.dumps(info, indent=1))


def _device_name() -> str:
    here = _model.device()
    return torch.cuda.get_device_name(here) if here.type == "cuda" else "cpu"


def _newest(ckpt: ShardedCheckpointer) -> int | None:
    info = ckpt.latest_info()
    return None if info is None else info.step


def _attempt() -> str:
    return os.environ.get("RGT_ATTEMPT", "1")


def _append(name: str, line: str) -> None:
    with open(OUT / name, "a", encoding="utf-8") as handle:
        handle.write(line + "\n")


if __name__ == "__main__":
    main()
