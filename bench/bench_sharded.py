"""Sharded save and load on 2 gloo ranks: rgt.ckpt.ShardedCheckpointer vs DCP, same run.

    .venv/bin/python bench/bench_sharded.py [--mb 500] [--repeats 5] [--dir DIR]

An FSDP2 MLP (1024x1024 Linear layers, fully_shard per layer) plus its Adam moments,
``--mb`` MB in all (each rank holds half), after one training step. Each repeat runs the
methods interleaved (dcp.save, dcp.async_save, rgt asynchronous), each into a fresh step, then
loads the same step with dcp.load and rgt's load_latest into the same state (which of the
two loads first alternates from repeat to repeat). Times are the
slowest rank's (all_reduce MAX), medians over the repeats after one warm-up save of each method:

- blocking: how long ``save`` held the training loop;
- durable: from the call until the step is complete on disk: ``dcp.save``'s return, the
  ``async_save`` future's result, rgt's ``wait()`` (rank 0: the manifest committed);
- load: ``dcp.load`` vs ``load_latest`` (shards verified by hash) of the newest step, with the
  page cache in three states, the same for both sides: "as saved" (whatever each save left
  there: ``dcp.save`` writes through the page cache, so its files are all cached; rgt writes
  with ``O_DIRECT``, so none of its shard is), "cold" (every file of both steps evicted with
  ``POSIX_FADV_DONTNEED`` just before the loads) and "warm" (every file of both steps read once
  just before the loads, so both are fully cached).

Printed goals: blocking <= 0.3x async_save, durable <= 1.0x dcp.save, load <= 1.1x dcp.load
(for each page-cache state).
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import torch.multiprocessing as mp
from torch import nn
from torch.distributed.checkpoint.state_dict import get_optimizer_state_dict
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from rgt.ckpt import ShardedCheckpointer

METHODS = ("dcp.save", "dcp.async_save", "rgt async")
CACHES = ("as saved", "cold", "warm")
GOALS = (
    ("blocking", "rgt async", "dcp.async_save", 0.3),
    ("durable", "rgt async", "dcp.save", 1.0),
    *((f"load {c}", f"rgt load_latest {c}", f"dcp.load {c}", 1.1) for c in CACHES),
)


def build(megabytes: int, world: int) -> tuple[nn.Module, torch.optim.Optimizer]:
    layers = max(1, round(megabytes / 12))  # 4 MiB of weights + 8 MiB of Adam moments each
    model = nn.Sequential(*[nn.Linear(1024, 1024, bias=False) for _ in range(layers)])
    mesh = init_device_mesh("cpu", (world,))
    for layer in model:
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    model(torch.randn(2, 1024)).sum().backward()
    opt.step()
    return model, opt


def slowest(seconds: float) -> float:
    value = torch.tensor([seconds], dtype=torch.float64)
    dist.all_reduce(value, op=dist.ReduceOp.MAX)
    return float(value.item())


def timed(action: Callable[[], Any]) -> tuple[float, Any]:
    dist.barrier()
    started = time.perf_counter()
    result = action()
    return time.perf_counter() - started, result


def dcp_save(state: Any, where: str) -> tuple[float, float]:
    seconds, _ = timed(lambda: dcp.save(state, checkpoint_id=where))
    return slowest(seconds), slowest(seconds)


def dcp_async(state: Any, where: str) -> tuple[float, float]:
    dist.barrier()
    started = time.perf_counter()
    future = dcp.async_save(state, checkpoint_id=where)
    blocking = time.perf_counter() - started
    future.result()
    return slowest(blocking), slowest(time.perf_counter() - started)


def rgt_async(ckpt: ShardedCheckpointer, state: Any, step: int) -> tuple[float, float]:
    dist.barrier()
    started = time.perf_counter()
    ckpt.save(state, step)
    blocking = time.perf_counter() - started
    ckpt.wait()
    return slowest(blocking), slowest(time.perf_counter() - started)


def one_repeat(ckpt: ShardedCheckpointer, state: Any, base: str, step: int) -> dict[str, Any]:
    where = {m: os.path.join(base, f"{m}-{step}") for m in METHODS[:2]}
    row = {
        "dcp.save": dcp_save(state, where["dcp.save"]),
        "dcp.async_save": dcp_async(state, where["dcp.async_save"]),
        "rgt async": rgt_async(ckpt, state, step),
    }
    loads = {
        "dcp.load": lambda: dcp.load(state, checkpoint_id=where["dcp.save"]),
        "rgt load_latest": lambda: ckpt.load_latest(state),
    }
    order = list(loads) if step % 2 == 0 else list(loads)[::-1]  # neither side always first
    for cache in CACHES:
        set_cache(cache, [where["dcp.save"], ckpt.latest_info().folder])  # type: ignore[union-attr]
        for method in order:
            seconds, _ = timed(loads[method])
            row[f"{method} {cache}"] = slowest(seconds)
        info = ckpt.loaded
        assert info is not None and info.step == step
    dist.barrier()
    if dist.get_rank() == 0:
        for path in where.values():
            shutil.rmtree(path, ignore_errors=True)
    return row


def set_cache(cache: str, folders: list[str]) -> None:
    """Rank 0 evicts (``cold``) or reads (``warm``) every file of both steps; the page cache
    is the machine's, so this is the state both ranks and both loaders see."""
    dist.barrier()
    if dist.get_rank() == 0 and cache != "as saved":
        for path in (p for folder in folders for p in Path(folder).rglob("*") if p.is_file()):
            with open(path, "rb", buffering=0) as handle:
                if cache == "cold":
                    os.posix_fadvise(handle.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
                else:
                    while handle.read(16 << 20):
                        pass
    dist.barrier()


def rank_main(rank: int, world: int, port: int, args: argparse.Namespace) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    model, opt = build(args.mb, world)
    state = {"model": model.state_dict(), "optim": get_optimizer_state_dict(model, opt)}
    ckpt = ShardedCheckpointer(os.path.join(args.dir, "rgt"), asynchronous=True, keep_last=1)
    rows = [one_repeat(ckpt, state, args.dir, step) for step in range(args.repeats + 1)]
    if rank == 0:
        report(rows[0], rows[1:], _state_mb(state) * world)
    dist.destroy_process_group()


def _state_mb(state: Any) -> float:
    tensors = list(state["model"].values()) + [
        v for slots in state["optim"]["state"].values() for v in slots.values()
    ]
    return sum(t.to_local().numel() * t.element_size() for t in tensors if hasattr(t, "to_local"))


def report(first: dict[str, Any], rows: list[dict[str, Any]], nbytes: float) -> None:
    print(f"state: {nbytes / 1e6:.0f} MB over 2 ranks; {len(rows)} repeats after a warm-up")
    print(f"{'method':18} {'blocking s':>22} {'durable s':>22}   (first save: blocking)")
    for method in METHODS:
        blocking, durable = [r[method][0] for r in rows], [r[method][1] for r in rows]
        print(f"{method:18} {_cell(blocking):>22} {_cell(durable):>22}   ({first[method][0]:.3f})")
    for cache in CACHES:
        for method in (f"dcp.load {cache}", f"rgt load_latest {cache}"):
            print(f"{method:24} load {_cell([r[method] for r in rows])}")
    for what, ours, theirs, goal in GOALS:
        ratio = statistics.median(_pick(r, ours, what) / _pick(r, theirs, what) for r in rows)
        verdict = "met" if ratio <= goal else "NOT met"
        print(f"{what:13} {ours} / {theirs}: {ratio:.3f}  goal <= {goal}  {verdict}")


def _pick(row: dict[str, Any], method: str, what: str) -> float:
    value = row[method]
    return float(value if what.startswith("load") else value[0 if what == "blocking" else 1])


def _cell(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} [{min(values):.3f}-{max(values):.3f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--dir", default=None)
    args = parser.parse_args()
    made = args.dir is None
    args.dir = args.dir or tempfile.mkdtemp(prefix="bench-sharded-", dir=os.getcwd())
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    try:
        mp.spawn(rank_main, args=(2, port, args), nprocs=2, join=True)
    finally:
        if made:
            shutil.rmtree(args.dir, ignore_errors=True)


if __name__ == "__main__":
    main()
