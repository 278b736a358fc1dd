"""Verifying a ~1 GB accelerate checkpoint folder vs one `sha256sum` pass over the same bytes.

    .venv/bin/python bench/bench_verify.py [--dir DIR] [--mb 1000] [--repeats 5] [--keep]

The folder is written by the real ``accelerate.Accelerator().save_state`` (CPU) for an MLP of
4096x4096 layers sized so that weights + AdamW's two moments come to about ``--mb`` MB, after
one optimizer step (so the moments are real values, not zeros). Three methods run interleaved
(A B C A B C ...) on a warm page cache; medians are reported:

- ``check_tree``: ``rgt.agent.verdicts.check_tree`` — every file's sha256, its structure read
  without unpickling, every float tensor scanned for NaN/inf, zip CRC-32s, the folder judged as
  a unit;
- ``sha256sum``: one ``sha256sum FILE...`` subprocess over the same files (GNU coreutils);
- ``hashlib``: one in-process ``hashlib.sha256`` pass, the floor for any verifier that hashes.

The files are deleted afterwards unless ``--keep`` (the disk is shared).
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from rgt.agent.verdicts import check_tree

WIDTH = 4096


def build(folder: Path, megabytes: int) -> float:
    """An accelerate save_state folder of about ``megabytes`` MB; returns the seconds it took."""
    import torch
    from accelerate import Accelerator

    layers = max(1, round(megabytes * 1e6 / (12 * WIDTH * WIDTH)))  # 4 B weight + 8 B moments
    model = torch.nn.Sequential(*(torch.nn.Linear(WIDTH, WIDTH) for _ in range(layers)))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    scheduler = torch.optim.lr_scheduler.LinearLR(optimizer)
    accelerator = Accelerator(cpu=True)
    model, optimizer, scheduler = accelerator.prepare(model, optimizer, scheduler)
    model(torch.randn(2, WIDTH)).square().mean().backward()
    optimizer.step()
    scheduler.step()
    started = time.perf_counter()
    accelerator.save_state(str(folder))
    return time.perf_counter() - started


def files_of(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file())


def run_check_tree(folder: Path) -> float:
    started = time.perf_counter()
    tree = check_tree(folder)
    elapsed = time.perf_counter() - started
    assert tree.ok and tree.units and tree.units[0].verdict == "ok", tree
    return elapsed


def run_sha256sum(files: list[Path]) -> float:
    started = time.perf_counter()
    subprocess.run(["sha256sum", *map(str, files)], check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def run_hashlib(files: list[Path]) -> float:
    started = time.perf_counter()
    for path in files:
        with path.open("rb") as handle:
            hashlib.file_digest(handle, "sha256")
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default=None, help="where to write the folder (default: temp)")
    parser.add_argument("--mb", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--keep", action="store_true", help="keep the files afterwards")
    args = parser.parse_args()
    base = Path(args.dir or tempfile.mkdtemp(prefix="rgt-bench-verify-"))
    folder = base / "step_100"
    try:
        saved = build(folder, args.mb)
        files = files_of(folder)
        total = sum(p.stat().st_size for p in files)
        print(f"accelerate save_state: {len(files)} files, {total / 1e6:.0f} MB in {saved:.1f} s")
        for path in files:
            print(f"  {path.name:<24} {path.stat().st_size / 1e6:9.1f} MB")
        measure(folder, files, total, args.repeats)
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)


def measure(folder: Path, files: list[Path], total: int, repeats: int) -> None:
    run_sha256sum(files)  # warm the page cache: every method then reads from memory
    times: dict[str, list[float]] = {"check_tree": [], "sha256sum": [], "hashlib": []}
    for _ in range(repeats):
        times["check_tree"].append(run_check_tree(folder))
        times["sha256sum"].append(run_sha256sum(files))
        times["hashlib"].append(run_hashlib(files))
    medians = {name: statistics.median(values) for name, values in times.items()}
    for name, values in times.items():
        rate = total / medians[name] / 1e6
        runs = " ".join(f"{v:.2f}" for v in values)
        print(f"{name:<11} median {medians[name]:.3f} s  ({rate:.0f} MB/s)  runs: {runs}")
    print(f"ratio check_tree / sha256sum = {medians['check_tree'] / medians['sha256sum']:.2f}x")
    print(f"ratio check_tree / hashlib   = {medians['check_tree'] / medians['hashlib']:.2f}x")


if __name__ == "__main__":
    main()
