"""Sharded save and load on 2 gloo ranks: rgt.ckpt.ShardedCheckpointer vs DCP, same run.

    .venv/bin/python bench/bench_sharded.py [--mb 500] [--repeats 5] [--dir DIR]

An FSDP2 MLP (1024x1024 Linear layers, fully_shard per layer) plus its Adam moments,
``--mb`` MB in all (each rank holds half), after one training step. Each repeat runs the
methods interleaved (dcp.save, dcp.async_save, rgt asynchronous with its default buffered
writes over recycled files, rgt asynchronous with ``direct_io=True``), each into a fresh step,
then loads the same step with dcp.load and rgt's load_latest into the same state (which loads
first alternates from repeat to repeat). Times are the slowest rank's (all_reduce MAX), medians
over the repeats after one warm-up save of each method:

- blocking: how long ``save`` held the training loop;
- durable: from the call until the step is complete on disk: ``dcp.save``'s return, the
  ``async_save`` future's result, rgt's ``wait()`` (rank 0: the manifest committed);
- CPU: CPU-seconds both ranks' processes spent from the call until durable (the training loop
  is idle here, so this is the save's own cost: the snapshot copy, hashing, serialisation and
  the kernel's copy into the page cache for buffered writes; the kernel's flusher threads are
  not counted);
- floor: each rank copies its tensors into a reused, pre-faulted buffer, both ranks at once:
  the memory copy any snapshot of these bytes costs, measured beside the saves;
- rgt overlap (``overlap=True``: the large tensors are copied on the writer thread and the next
  optimizer step waits for that copy): blocking is ``save()``'s return PLUS the time the next
  ``opt.step()`` waited in rgt's pre-hook, with one real training step (zero_grad, forward and
  backward of the same model on a batch of 2) between the save and ``opt.step()``; durable is
  the call to ``wait()``'s return with that training step run alongside; its CPU is not shown
  (it would count the training step). "rgt overlap, no work" calls ``opt.step()`` right after
  ``save()``: the copy is then not hidden at all (the floor of the overlap). "rgt async, step
  after" is the plain asynchronous save timed the same way (a training step, then
  ``opt.step()``). The forward and backward are timed too: alone (no save), beside a plain
  asynchronous save's writer (hashing and writing) and beside an overlapped save's writer
  (copying, then hashing and writing): what the overlap hides from ``save()`` it partly takes
  from the step running beside it, on 2 shared cores;
- load: ``dcp.load`` vs ``load_latest`` (shards verified by hash) of the newest step, with the
  page cache in three states, the same for both sides: "as saved" (whatever each save left
  there: ``dcp.save`` and rgt's default write through the page cache, so their files are
  cached; ``direct_io=True`` leaves none of its shard there, and its load is shown as saved
  only), "cold" (every file of both steps evicted with
  ``POSIX_FADV_DONTNEED`` just before the loads) and "warm" (every file of both steps read once
  just before the loads, so both are fully cached).

Printed goals: blocking <= 0.3x async_save, durable <= 1.0x dcp.save, load <= 1.1x dcp.load
(for each page-cache state); the load average before and after.
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

METHODS = ("dcp.save", "dcp.async_save", "rgt async", "rgt async direct")
OVERLAP = ("rgt overlap", "rgt overlap, no work")
AFTER = "rgt async, step after"
STEPS = ("train step alone", "train step beside rgt async", "train step beside rgt overlap")
CACHES = ("as saved", "cold", "warm")
LOADERS = ("dcp.load", "rgt load_latest")
DIRECT_LOAD = "rgt load_latest direct as saved"
GOALS = (
    ("blocking", "rgt async", "dcp.async_save", 0.3),
    ("durable", "rgt async", "dcp.save", 1.0),
    *((f"load {c}", f"rgt load_latest {c}", f"dcp.load {c}", 1.1) for c in CACHES),
    ("blocking", "rgt async direct", "dcp.async_save", 0.3),
    ("durable", "rgt async direct", "dcp.save", 1.0),
    ("load as saved", DIRECT_LOAD, "dcp.load as saved", 1.1),
    ("blocking", "floor: memcpy", "dcp.async_save", 0.3),
    *(("blocking", m, "dcp.async_save", 0.3) for m in OVERLAP),
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


def reduced(value: float, op: Any = None) -> float:
    tensor = torch.tensor([value], dtype=torch.float64)
    dist.all_reduce(tensor, op=op or dist.ReduceOp.MAX)
    return float(tensor.item())


def timed(action: Callable[[], Any]) -> tuple[float, Any]:
    dist.barrier()
    started = time.perf_counter()
    result = action()
    return time.perf_counter() - started, result


def saved(start: Callable[[], Any], finish: Callable[[Any], Any]) -> tuple[float, float, float]:
    """(blocking, durable, CPU-seconds of both ranks) of one save: ``start`` returns once the
    loop may go on, ``finish`` waits until the step is on disk."""
    dist.barrier()
    cpu, started = time.process_time(), time.perf_counter()
    handle = start()
    blocking = time.perf_counter() - started
    finish(handle)
    durable, cpu = time.perf_counter() - started, time.process_time() - cpu
    return reduced(blocking), reduced(durable), reduced(cpu, dist.ReduceOp.SUM)


def train(model: nn.Module, opt: torch.optim.Optimizer) -> float:
    """One training step's forward and backward (no ``opt.step``); its seconds."""
    started = time.perf_counter()
    opt.zero_grad()
    model(torch.randn(2, 1024)).sum().backward()
    return time.perf_counter() - started


def overlapped(
    ckpt: ShardedCheckpointer, state: Any, step: int, trainer: Any, work: bool
) -> tuple[tuple[float, float, float], float]:
    """(blocking, durable, -) of one overlapped save, and the training step's seconds: blocking
    is save()'s return plus what the next ``opt.step()`` waited for the copy."""
    model, opt = trainer
    dist.barrier()
    started = time.perf_counter()
    ckpt.save(state, step)
    returned = time.perf_counter() - started
    seconds = train(model, opt) if work else 0.0
    opt.step()  # rgt's pre-hook: waits until the copy is done
    blocking = returned + ckpt.last_copy_wait_seconds
    ckpt.wait()
    durable = time.perf_counter() - started
    return (reduced(blocking), reduced(durable), float("nan")), reduced(seconds)


def overlap_rows(ckpts: dict[str, ShardedCheckpointer], state: Any, step: int, trainer: Any) -> Any:
    dist.barrier()
    row: dict[str, Any] = {STEPS[0]: reduced(train(*trainer))}
    row[AFTER], row[STEPS[1]] = overlapped(ckpts[AFTER], state, step, trainer, work=True)
    row[OVERLAP[0]], row[STEPS[2]] = overlapped(ckpts[OVERLAP[0]], state, step, trainer, True)
    row[OVERLAP[1]], _ = overlapped(ckpts[OVERLAP[1]], state, step, trainer, work=False)
    return row


def one_repeat(
    ckpts: dict[str, ShardedCheckpointer], state: Any, base: str, step: int, trainer: Any
) -> Any:
    where = {m: os.path.join(base, f"{m}-{step}") for m in METHODS[:2]}
    row: dict[str, Any] = {
        "dcp.save": saved(lambda: dcp.save(state, checkpoint_id=where["dcp.save"]), _none),
        "dcp.async_save": saved(
            lambda: dcp.async_save(state, checkpoint_id=where["dcp.async_save"]),
            lambda future: future.result(),
        ),
        **{
            m: saved(lambda c=c: c.save(state, step), lambda _, c=c: c.wait())
            for m, c in ckpts.items()
            if m in METHODS
        },
        "floor: memcpy": (floor(state), 0.0, 0.0),
        **overlap_rows(ckpts, state, step, trainer),
    }
    row.update(loads(ckpts, state, where["dcp.save"], step))
    dist.barrier()
    if dist.get_rank() == 0:
        for path in where.values():
            shutil.rmtree(path, ignore_errors=True)
    return row


def _none(_: Any) -> None:
    return None


def loads(
    ckpts: dict[str, ShardedCheckpointer], state: Any, dcp_step: str, step: int
) -> dict[str, float]:
    """Every load of one step, by page-cache state; which side loads first alternates."""
    rgt, direct = ckpts["rgt async"], ckpts["rgt async direct"]
    actions = {
        "dcp.load": lambda: dcp.load(state, checkpoint_id=dcp_step),
        "rgt load_latest": lambda: rgt.load_latest(state),
    }
    order = list(LOADERS) if step % 2 == 0 else list(LOADERS)[::-1]  # neither side always first
    row = {}
    for cache in CACHES:
        set_cache(cache, [dcp_step, rgt.latest_info().folder])  # type: ignore[union-attr]
        for method in order:
            row[f"{method} {cache}"] = reduced(timed(actions[method])[0])
        if cache == "as saved":
            row[DIRECT_LOAD] = reduced(timed(lambda: direct.load_latest(state))[0])
            assert direct.loaded is not None and direct.loaded.step == step
        assert rgt.loaded is not None and rgt.loaded.step == step
    return row


def floor(state: Any, buffer: list[Any] = []) -> float:  # noqa: B006 - reused on purpose
    """Seconds for both ranks at once to copy this rank's tensors into a reused buffer."""
    tensors = [t.to_local() if hasattr(t, "to_local") else t for t in _tensors(state)]
    total = sum(t.numel() * t.element_size() for t in tensors)
    if not buffer:
        buffer.append(torch.zeros(total, dtype=torch.uint8))  # zeroed: every page faulted in
    dist.barrier()
    started, offset = time.perf_counter(), 0
    for tensor in tensors:
        nbytes = tensor.numel() * tensor.element_size()
        buffer[0][offset : offset + nbytes].copy_(tensor.reshape(-1).view(torch.uint8))
        offset += nbytes
    return reduced(time.perf_counter() - started)


def _tensors(state: Any) -> list[Any]:
    return list(state["model"].values()) + [
        v for slots in state["optim"]["state"].values() for v in slots.values()
    ]


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
    ckpts = {
        method: ShardedCheckpointer(
            os.path.join(args.dir, method.replace(" ", "-")),
            asynchronous=True,
            keep_last=1,
            direct_io=method.endswith("direct"),
            overlap=method in OVERLAP,
        )
        for method in (*METHODS[2:], AFTER, *OVERLAP)
    }
    load_before = os.getloadavg()
    trainer = (model, opt)
    rows = [one_repeat(ckpts, state, args.dir, step, trainer) for step in range(args.repeats + 1)]
    if rank == 0:
        report(rows[0], rows[1:], _state_mb(state) * world)
        print(f"load average (1 min) before {load_before[0]:.1f}, after {os.getloadavg()[0]:.1f}")
    dist.destroy_process_group()


def _state_mb(state: Any) -> float:
    tensors = [t.to_local() for t in _tensors(state) if hasattr(t, "to_local")]
    return sum(t.numel() * t.element_size() for t in tensors)


def report(first: dict[str, Any], rows: list[dict[str, Any]], nbytes: float) -> None:
    print(f"state: {nbytes / 1e6:.0f} MB over 2 ranks; {len(rows)} repeats after a warm-up")
    print(f"{'method':22} {'blocking s':>22} {'durable s':>22} {'CPU s':>22}   (first: blocking)")
    for method in (*METHODS, "floor: memcpy", AFTER, *OVERLAP):
        cells = [_cell([r[method][i] for r in rows]) for i in range(3)]
        if method not in METHODS:  # durable only where it was timed; CPU only for the saves
            cells[1:] = [cells[1] if method in (AFTER, *OVERLAP) else "-", "-"]
        print(
            f"{method:22} {cells[0]:>22} {cells[1]:>22} {cells[2]:>22}   ({first[method][0]:.3f})"
        )
    for method in STEPS:
        print(f"{method:31} {_cell([r[method] for r in rows])}")
    for cache in CACHES:
        for method in (f"dcp.load {cache}", f"rgt load_latest {cache}"):
            print(f"{method:31} load {_cell([r[method] for r in rows])}")
        if cache == "as saved":
            print(f"{DIRECT_LOAD:31} load {_cell([r[DIRECT_LOAD] for r in rows])}")
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
