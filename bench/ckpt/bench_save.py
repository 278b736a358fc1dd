"""What a checkpoint costs a training loop: torch.save, DCP and rgt.ckpt side by side, one run.

    .venv/bin/python bench/ckpt/bench_save.py [--dir DIR] [--repeats 5] [--threads 2]

A 42M-parameter MLP trained with Adam (state ~ 504 MB: weights + two moments). Every method
trains the same 30 steps and saves at steps 4, 12 and 20; methods run interleaved (one run of
each per repeat) so page-cache, host-cache and neighbour-load drift hit all alike. Per save:
blocking time (what the loop waits, including waiting for a previous save still in flight),
end-to-end cost ((wall of 30 steps with 3 saves, until the last save is durable) minus (wall
of 30 steps with none), / 3), time until durable (call -> data fsync'd and committed), CPU
seconds (process CPU of the run minus the no-checkpoint run, / 3), peak extra resident memory
(VmHWM during the run minus VmRSS before it). Medians with [min-max] over the repeats. Also the
memcpy floor (copying the state into a preallocated host buffer), `dd conv=fsync` before and
after, the load average, and Daly's published examples.

"rgt async" starts each run with a fresh Checkpointer, so its first save also allocates and
faults in the staging arena. "rgt async reserved" calls ``ckpt.reserve(state)`` before the
timed steps (what ``load_latest`` does by itself on a resume); the allocation then runs in a
background thread, partly inside the timed window. "floor: memcpy+O_DIRECT" is the design
with nothing on top: tensors copied into a preallocated page-aligned buffer, a thread writing it
with O_DIRECT and fsync; no hash, no format, no commit record, no retention. "floor: dd
process" is what the disk write alone costs the loop: another process (`dd oflag=direct
conv=fsync`) writes as many bytes at each save step, and the training process copies nothing.
No asynchronous checkpoint that writes the state to this disk can cost less.
"""

from __future__ import annotations

import argparse
import gc
import mmap
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

from rgt.ckpt import Checkpointer, daly_interval

STEPS, SAVE_AT = 30, (4, 12, 20)
METHODS = (
    "none",
    "torch.save atomic",
    "dcp.save",
    "dcp.async_save",
    "rgt sync",
    "rgt async",
    "rgt async reserved",
    "floor: memcpy+O_DIRECT",
    "floor: dd process",
)


@dataclass
class Run:
    wall: float = 0.0
    cpu: float = 0.0
    peak_extra_mb: float = 0.0
    blocking: list[float] = field(default_factory=list)
    durable: list[float] = field(default_factory=list)


def make_model() -> tuple[nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(0)
    model = nn.Sequential(*[nn.Linear(2048, 2048) for _ in range(10)])  # 41.96M parameters
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    return model, opt


def train_step(model: nn.Module, opt: torch.optim.Optimizer, batch: torch.Tensor) -> None:
    opt.zero_grad(set_to_none=False)  # gradients stay allocated: no fresh pages per step
    model(batch).square().mean().backward()
    opt.step()


def state_of(model: nn.Module, opt: torch.optim.Optimizer, step: int) -> dict[str, Any]:
    return {"model": model.state_dict(), "optimizer": opt.state_dict(), "step": step}


def fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class TorchAtomic:
    def __init__(self, root: str) -> None:
        self.root = root

    def save(self, state: Any, step: int, run: Run, t0: float) -> None:
        tmp = os.path.join(self.root, f".ckpt-{step}.tmp")
        with open(tmp, "wb") as handle:
            torch.save(state, handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, os.path.join(self.root, "latest.pt"))
        fsync_dir(self.root)
        run.durable.append(time.perf_counter() - t0)

    def finish(self, run: Run) -> None:
        pass


class DcpSync(TorchAtomic):
    def save(self, state: Any, step: int, run: Run, t0: float) -> None:
        import torch.distributed.checkpoint as dcp

        dcp.save(state, checkpoint_id=os.path.join(self.root, f"step-{step}"))
        run.durable.append(time.perf_counter() - t0)


class DcpAsync(TorchAtomic):
    def __init__(self, root: str) -> None:
        super().__init__(root)
        self.pending: Any = None

    def save(self, state: Any, step: int, run: Run, t0: float) -> None:
        import torch.distributed.checkpoint as dcp

        self.finish(run)  # one save in flight at a time, as with rgt
        future = dcp.async_save(state, checkpoint_id=os.path.join(self.root, f"step-{step}"))
        future = getattr(future, "upload_completion", future)
        future.add_done_callback(lambda _f: run.durable.append(time.perf_counter() - t0))
        self.pending = future

    def finish(self, run: Run) -> None:
        if self.pending is not None:
            self.pending.result()
            self.pending = None


class Rgt(TorchAtomic):
    def __init__(self, root: str, asynchronous: bool, reserve_for: Any = None) -> None:
        super().__init__(root)
        self.ckpt = Checkpointer(root, keep_last=1, asynchronous=asynchronous)
        self.t0: float | None = None
        if reserve_for is not None:
            self.ckpt.reserve(reserve_for)

    def save(self, state: Any, step: int, run: Run, t0: float) -> None:
        self.finish(run)
        self.ckpt.save(state, step)
        self.t0 = t0
        if not self.ckpt.asynchronous:
            self.finish(run)

    def finish(self, run: Run) -> None:
        if self.t0 is not None:
            self.ckpt.wait()
            assert self.ckpt.last_durable_at is not None
            run.durable.append(self.ckpt.last_durable_at - self.t0)
            self.t0 = None


class Floor(TorchAtomic):
    """The asynchronous design's floor on this machine (see the module docstring)."""

    CHUNK = 16 << 20

    def __init__(self, root: str, state: Any) -> None:
        super().__init__(root)
        nbytes = sum(t.numel() * t.element_size() for t in state_tensors(state))
        self.size = -(-nbytes // self.CHUNK) * self.CHUNK
        flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | mmap.MAP_POPULATE
        self.buffer = mmap.mmap(-1, self.size, flags=flags)
        self.arena = torch.frombuffer(self.buffer, dtype=torch.uint8)
        self.thread: threading.Thread | None = None
        self.t0 = self.done = 0.0

    def save(self, state: Any, step: int, run: Run, t0: float) -> None:
        self.finish(run)
        offset = 0
        for tensor in state_tensors(state):
            size = tensor.numel() * tensor.element_size()
            self.arena[offset : offset + size].copy_(tensor.reshape(-1).view(torch.uint8))
            offset += size
        self.t0 = t0
        self.thread = threading.Thread(target=self.write, args=(step,))
        self.thread.start()

    def write(self, step: int) -> None:
        path = os.path.join(self.root, f"floor-{step}.bin")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_DIRECT, 0o644)
        with memoryview(self.buffer) as view:
            for start in range(0, self.size, self.CHUNK):
                os.pwrite(fd, view[start : start + self.CHUNK], start)
        os.fsync(fd)
        os.close(fd)
        self.done = time.perf_counter()

    def finish(self, run: Run) -> None:
        if self.thread is not None:
            self.thread.join()
            run.durable.append(self.done - self.t0)
            self.thread = None


class DdProcess(TorchAtomic):
    """The disk write alone, from another process (see the module docstring)."""

    def __init__(self, root: str, state: Any) -> None:
        super().__init__(root)
        nbytes = sum(t.numel() * t.element_size() for t in state_tensors(state))
        self.count = -(-nbytes // (4 << 20))  # 4 MiB blocks
        self.proc: subprocess.Popen[bytes] | None = None
        self.t0 = 0.0

    def save(self, state: Any, step: int, run: Run, t0: float) -> None:
        self.finish(run)
        path = os.path.join(self.root, f"dd-{step}.bin")
        argv = ["dd", "if=/dev/zero", f"of={path}", "bs=4M", f"count={self.count}"]
        self.proc = subprocess.Popen([*argv, "oflag=direct", "conv=fsync"], stderr=subprocess.PIPE)
        self.t0 = t0

    def finish(self, run: Run) -> None:
        if self.proc is not None:
            _, err = self.proc.communicate()
            if self.proc.returncode != 0:
                raise RuntimeError(f"dd failed: {err.decode(errors='replace')}")
            run.durable.append(time.perf_counter() - self.t0)
            self.proc = None


def saver_for(method: str, root: str, state: Any) -> TorchAtomic | None:
    if method == "none":
        return None
    if method == "floor: dd process":
        return DdProcess(root, state)
    if method.startswith("floor"):
        return Floor(root, state)
    if method.startswith("rgt"):
        reserve = state if method == "rgt async reserved" else None
        return Rgt(root, method != "rgt sync", reserve)
    return {"torch.save atomic": TorchAtomic, "dcp.save": DcpSync, "dcp.async_save": DcpAsync}[
        method
    ](root)


def proc_kb(field_name: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field_name + ":"):
            return float(line.split()[1])
    return 0.0


def train_run(method: str, root: str) -> Run:
    model, opt = make_model()
    batch = torch.randn(4, 2048, generator=torch.Generator().manual_seed(1))
    train_step(model, opt, batch)  # Adam's moments exist from here: the full ~504 MB state
    os.makedirs(root, exist_ok=True)
    saver = saver_for(method, root, state_of(model, opt, 0))
    gc.collect()
    Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM to the current RSS
    rss_before, run = proc_kb("VmRSS"), Run()
    cpu0, wall0 = time.process_time(), time.perf_counter()
    for step in range(1, STEPS + 1):
        train_step(model, opt, batch)
        if saver is not None and step in SAVE_AT:
            t0 = time.perf_counter()
            saver.save(state_of(model, opt, step), step, run, t0)
            run.blocking.append(time.perf_counter() - t0)
    if saver is not None:
        saver.finish(run)  # the run is done when its last checkpoint is durable
    run.wall, run.cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    run.peak_extra_mb = (proc_kb("VmHWM") - rss_before) / 1024
    del saver
    gc.collect()
    return run


def memcpy_floor(repeats: int = 5) -> float:
    model, opt = make_model()
    train_step(model, opt, torch.randn(16, 2048))
    tensors = [t for t in state_tensors(state_of(model, opt, 1))]
    buffer = torch.empty(sum(t.numel() * t.element_size() for t in tensors), dtype=torch.uint8)
    times = []
    for _ in range(repeats + 1):
        started, offset = time.perf_counter(), 0
        for tensor in tensors:
            size = tensor.numel() * tensor.element_size()
            buffer[offset : offset + size].copy_(tensor.reshape(-1).view(torch.uint8))
            offset += size
        times.append(time.perf_counter() - started)
    return statistics.median(times[1:])  # the first copy also faults the buffer's pages in


def state_tensors(obj: Any) -> list[torch.Tensor]:
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, dict):
        return [t for v in obj.values() for t in state_tensors(v)]
    if isinstance(obj, list | tuple):
        return [t for v in obj for t in state_tensors(v)]
    return []


def dd(directory: str) -> str:
    target = os.path.join(directory, "dd.bin")
    proc = subprocess.run(
        ["dd", "if=/dev/zero", f"of={target}", "bs=1M", "count=500", "conv=fsync"],
        capture_output=True,
        text=True,
    )
    os.unlink(target)
    return proc.stderr.strip().splitlines()[-1]


def spread(values: list[float], unit: str = "s", digits: int = 3) -> str:
    if not values:
        return "n/a"
    med = statistics.median(values)
    return f"{med:.{digits}f} [{min(values):.{digits}f}-{max(values):.{digits}f}]"


def bench(args: argparse.Namespace, root: str) -> None:
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {args.threads} training threads, {os.cpu_count()} CPUs")
    print(f"load average before: {os.getloadavg()}")
    print(f"dd before: {dd(root)}")
    floor = memcpy_floor()
    for method in args.methods:  # warm-up: allocator, page faults of a fresh VM, lazy imports
        train_run(method, os.path.join(root, "warm-up"))
        shutil.rmtree(os.path.join(root, "warm-up"), ignore_errors=True)
    runs: dict[str, list[Run]] = {m: [] for m in args.methods}
    for repeat in range(args.repeats):
        for method in args.methods:
            path = os.path.join(root, f"{method.replace(' ', '_')}-{repeat}")
            runs[method].append(train_run(method, path))
            shutil.rmtree(path, ignore_errors=True)
        print(f"repeat {repeat + 1}/{args.repeats} done, load average {os.getloadavg()}")
    print(f"dd after:  {dd(root)}")
    print(f"load average after: {os.getloadavg()}")
    report(runs, floor)


def per_save_costs(runs: dict[str, list[Run]], method: str) -> tuple[list[float], list[float]]:
    """(end-to-end cost per save, CPU seconds per save) of each repeat, against the median
    no-checkpoint run (one neighbour's burst in one baseline run would swing a paired
    difference by seconds)."""
    wall = statistics.median(r.wall for r in runs["none"])
    cpu = statistics.median(r.cpu for r in runs["none"])
    saves = len(SAVE_AT)
    return [(r.wall - wall) / saves for r in runs[method]], [
        (r.cpu - cpu) / saves for r in runs[method]
    ]


def paired_costs(runs: dict[str, list[Run]], method: str) -> list[float]:
    """End-to-end cost per save against the no-checkpoint run of the same repeat: robust to the
    machine's speed drifting between repeats (this VM's no-checkpoint run has varied 7-15 s),
    not to a burst inside one run."""
    saves = len(SAVE_AT)
    return [(r.wall - n.wall) / saves for r, n in zip(runs[method], runs["none"], strict=True)]


def report(runs: dict[str, list[Run]], floor: float) -> None:
    print(f"\nmemcpy floor (state into a preallocated host buffer): {floor:.3f} s")
    none_wall = [r.wall for r in runs["none"]]
    print(f"30 steps without checkpoints: {spread(none_wall)} s")
    print("raw wall s / CPU s of each run, in repeat order:")
    for method in runs:
        cells = " ".join(f"{r.wall:.2f}/{r.cpu:.2f}" for r in runs[method])
        print(f"  {method:<24}{cells}")
    print()
    header = (
        f"{'method':<24}{'blocking/save s':>24}{'end-to-end/save s':>26}{'paired e2e/save s':>26}"
        f"{'until durable s':>24}{'CPU s/save':>24}{'peak extra MB':>16}"
    )
    print(header)
    med: dict[str, dict[str, float]] = {}
    for method in list(runs)[1:]:
        blocking = [statistics.mean(r.blocking) for r in runs[method]]
        durable = [statistics.mean(r.durable) for r in runs[method] if r.durable]
        e2e, cpu = per_save_costs(runs, method)
        paired = paired_costs(runs, method)
        peak = [r.peak_extra_mb for r in runs[method]]
        print(
            f"{method:<24}{spread(blocking):>24}{spread(e2e):>26}{spread(paired):>26}"
            f"{spread(durable):>24}{spread(cpu):>24}{spread(peak, digits=0):>16}"
        )
        med[method] = {
            "blocking": statistics.median(blocking),
            "e2e": statistics.median(e2e),
            "paired": statistics.median(paired),
            "durable": statistics.median(durable) if durable else float("nan"),
        }
    print("\nblocking of the first save of a run vs the later ones (median over repeats):")
    for method in [m for m in ("rgt async", "rgt async reserved", "dcp.async_save") if m in runs]:
        first = [r.blocking[0] for r in runs[method]]
        later = [b for r in runs[method] for b in r.blocking[1:]]
        print(f"  {method:<24} first {spread(first)} s   later {spread(later)} s")
    for ours in ("rgt async", "rgt async reserved"):
        if {ours, "torch.save atomic", "dcp.async_save"} <= set(med):
            goals(med, floor, ours)
    for bare in ("floor: memcpy+O_DIRECT", "floor: dd process"):
        if bare in med and "rgt async reserved" in med:
            ours_ = med["rgt async reserved"]
            print(
                f"\nrgt async reserved / {bare}: end-to-end "
                f"{ours_['e2e'] / med[bare]['e2e']:.2f}x, "
                f"paired {ours_['paired'] / med[bare]['paired']:.2f}x"
            )
    daly()


def goals(med: dict[str, dict[str, float]], floor: float, ours: str) -> None:
    rgt, atomic, dcp_async = med[ours], med["torch.save atomic"], med["dcp.async_save"]
    checks: list[tuple[str, float, str]] = [
        ("blocking / torch.save atomic blocking", rgt["blocking"] / atomic["blocking"], "<= 0.10"),
        ("blocking / memcpy floor", rgt["blocking"] / floor, "<= 1.5"),
        ("end-to-end / torch.save atomic end-to-end", rgt["e2e"] / atomic["e2e"], "<= 0.20"),
        ("end-to-end / dcp.async_save end-to-end", rgt["e2e"] / dcp_async["e2e"], "<= 0.25"),
        ("paired e2e / torch.save atomic paired e2e", rgt["paired"] / atomic["paired"], "<= 0.20"),
        ("paired e2e / dcp.async_save paired e2e", rgt["paired"] / dcp_async["paired"], "<= 0.25"),
        ("time until durable (s)", rgt["durable"], "<= 2"),
    ]
    print(f"\ngoals for {ours} (medians):")
    for name, value, goal in checks:
        limit = float(goal.split()[-1])
        print(f"  {name:<54}{value:>8.3f}  goal {goal:<8} {'met' if value <= limit else 'NOT met'}")


def daly() -> None:
    print("\nDaly (2006) examples, delta = 5 min (paper: 117, 57, 9.1 min):")
    for mtbf_min, paper in ((24 * 60, 117.0), (6 * 60, 57.0), (15, 9.1)):
        tau = daly_interval(5 * 60.0, mtbf_min * 60.0) / 60
        print(
            f"  M = {mtbf_min:>5} min: tau = {tau:7.2f} min, paper {paper}, "
            f"off by {abs(tau - paper) / paper:.2%}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default=None, help="where to write (default: system temp dir)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2, help="torch threads of the training")
    parser.add_argument(
        "--methods",
        default=",".join(METHODS),
        help=f'comma-separated subset ("none" is always run); default all: {", ".join(METHODS)}',
    )
    args = parser.parse_args()
    chosen = [m.strip() for m in args.methods.split(",") if m.strip()]
    unknown = sorted(set(chosen) - set(METHODS))
    if unknown:
        parser.error(f"unknown method(s) {unknown}; choose from {', '.join(METHODS)}")
    args.methods = ["none", *[m for m in METHODS if m in chosen and m != "none"]]
    root = tempfile.mkdtemp(prefix="bench-ckpt-", dir=args.dir)
    try:
        bench(args, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
