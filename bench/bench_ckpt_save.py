"""rgt.ckpt.save vs plain torch.save of the same ~200 MB state, on the same disk, in one run.

    .venv/bin/python bench/bench_ckpt_save.py [--dir DIR] [--mb 200] [--repeats 7]

Methods run interleaved (A B C A B C ...) so page-cache and host-cache drift hit all of them
alike; medians are reported. ``save ratio`` = rgt.ckpt.save / torch.save is the price of
atomicity (temp file, rename, directory fsync), durability (fsync of the data) and the two
hashes (sha256 of the bytes, state_digest of the values); the goal is <= 1.25x. The disk's
fsync'd write speed is measured before and after, since this virtual disk is host-cached.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from rgt.ckpt import Checkpointer, state_digest


def make_state(megabytes: int) -> dict[str, Any]:
    """A model plus Adam moments (3 tensors per parameter), ~``megabytes`` in total."""
    layers = max(1, round(megabytes / 12))  # 1024x1024 fp32 = 4 MiB, x3 with the moments
    model = {f"layer{i}.weight": torch.randn(1024, 1024) for i in range(layers)}
    moments = {
        i: {
            "step": torch.tensor(100.0),
            "exp_avg": torch.randn(1024, 1024),
            "exp_avg_sq": torch.rand(1024, 1024),
        }
        for i in range(layers)
    }
    optimizer = {"state": moments, "param_groups": [{"lr": 1e-3, "params": list(range(layers))}]}
    return {"model": model, "optimizer": optimizer, "step": 100, "epoch": 1}


def timed(action: Callable[[], object]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def disk_write_speed(directory: str, megabytes: int = 200) -> float:
    """MB/s of an fsync'd sequential write (what `dd conv=fsync` reports)."""
    path = os.path.join(directory, "dd.bin")
    block = os.urandom(1 << 20)

    def write() -> None:
        with open(path, "wb") as handle:
            for _ in range(megabytes):
                handle.write(block)
            handle.flush()
            os.fsync(handle.fileno())

    seconds = timed(write)
    os.unlink(path)
    return megabytes * 1.048576 / seconds


def plain_save(state: Any, path: str) -> None:
    torch.save(state, path)


def plain_atomic_save(state: Any, path: str) -> None:
    tmp = path + ".tmp"
    with open(tmp, "wb") as handle:
        torch.save(state, handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def run(args: argparse.Namespace) -> None:
    root = tempfile.mkdtemp(prefix="bench-ckpt-", dir=args.dir)
    try:
        bench(args, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def bench(args: argparse.Namespace, root: str) -> None:
    torch.set_num_threads(1)
    state = make_state(args.mb)
    plain_path = os.path.join(root, "plain.pt")
    ckpt = Checkpointer(os.path.join(root, "ckpt"), keep_last=1)
    speeds = [disk_write_speed(root)]
    print(f"disk {root}: fsync'd write before: {speeds[0]:.0f} MB/s")
    saves: dict[str, list[float]] = {
        "torch.save": [],
        "torch.save+fsync+rename": [],
        "rgt.ckpt.save": [],
    }
    loads: dict[str, list[float]] = {"torch.load": [], "rgt.ckpt.load_latest": []}
    plain_save(state, plain_path)  # warm-up: allocator, page cache, imports
    ckpt.save(state, 0)
    for step in range(1, args.repeats + 1):
        saves["torch.save"].append(timed(lambda: plain_save(state, plain_path)))
        saves["torch.save+fsync+rename"].append(timed(lambda: plain_atomic_save(state, plain_path)))
        saves["rgt.ckpt.save"].append(timed(lambda s=step: ckpt.save(state, s)))
        loads["torch.load"].append(timed(lambda: torch.load(plain_path, weights_only=True)))
        loads["rgt.ckpt.load_latest"].append(timed(ckpt.load_latest))
    speeds.append(disk_write_speed(root))
    print(f"disk {root}: fsync'd write after:  {speeds[1]:.0f} MB/s")
    info = ckpt.latest_info(verify=False)
    size = info.bytes if info else 0
    digest_s = statistics.median(timed(lambda: state_digest(state)) for _ in range(3))
    report(saves, loads, size, digest_s)
    floor = size / 1e6 / statistics.mean(speeds)
    print(
        f"durability floor (bytes / fsync'd write speed): {floor:.3f} s = "
        f"{floor / statistics.median(saves['torch.save']):.2f}x torch.save, which never waits "
        "for the disk"
    )


def report(
    saves: dict[str, list[float]], loads: dict[str, list[float]], size: int, digest_s: float
) -> None:
    print(f"\nstate: {size / 1e6:.0f} MB, {len(saves['torch.save'])} interleaved repeats")
    print(f"{'method':<26}{'median s':>10}{'min s':>9}{'max s':>9}{'MB/s':>8}")
    for name, samples in {**saves, **loads}.items():
        median = statistics.median(samples)
        print(
            f"{name:<26}{median:>10.3f}{min(samples):>9.3f}{max(samples):>9.3f}"
            f"{size / 1e6 / median:>8.0f}"
        )
    med = {name: statistics.median(s) for name, s in {**saves, **loads}.items()}
    print(
        f"\nsave ratio rgt.ckpt.save / torch.save:              "
        f"{med['rgt.ckpt.save'] / med['torch.save']:.2f}x  (goal <= 1.25x)"
    )
    print(
        f"save ratio rgt.ckpt.save / torch.save+fsync+rename: "
        f"{med['rgt.ckpt.save'] / med['torch.save+fsync+rename']:.2f}x"
    )
    print(
        f"load ratio rgt.ckpt.load_latest / torch.load:       "
        f"{med['rgt.ckpt.load_latest'] / med['torch.load']:.2f}x"
    )
    print(f"state_digest alone (runs alongside the write in save): {digest_s:.3f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default=None, help="where to write (default: system temp dir)")
    parser.add_argument("--mb", type=int, default=200, help="approximate state size in MB")
    parser.add_argument("--repeats", type=int, default=7)
    run(parser.parse_args())


if __name__ == "__main__":
    main()
