"""The price of the verified flush: rgt.ckpt.save with and without a durable mirror, in one run.

    .venv/bin/python bench/bench_ckpt_mirror.py [--dir DIR] [--mirror DIR] [--mb 100] [--repeats 5]

Both methods save the same state (bytes, no torch needed) and run interleaved (A B A B ...);
medians are reported. ``mirror ratio`` = save with mirror / save without: the copy, its fsync
and the read-back hash, paid in the writer (the training thread for a synchronous
Checkpointer, the background writer with ``asynchronous=True``). On a real Drive mount the
upload lag adds read-back retries on top; here the mirror is a plain directory (default: a
second folder on the same disk), so this measures rgt's own work only.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from rgt.ckpt import Checkpointer


def one_save(directory: Path, mirror: Path | None, state: dict[str, object], step: int) -> float:
    ckpt = Checkpointer(directory, keep_last=1, mirror=mirror)
    started = time.perf_counter()
    ckpt.save(state, step)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default=None, help="local checkpoint disk (default: a temp dir)")
    parser.add_argument("--mirror", default=None, help="the durable folder (default: a temp dir)")
    parser.add_argument("--mb", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="rgt-bench-mirror-", dir=args.dir))
    mirror = Path(args.mirror or root / "mirror")
    state = {"weights": os.urandom(args.mb << 20), "step": 0}
    plain: list[float] = []
    mirrored: list[float] = []
    try:
        for step in range(1, args.repeats + 1):
            plain.append(one_save(root / "plain", None, state, step))
            mirrored.append(one_save(root / "local", mirror, state, step))
    finally:
        shutil.rmtree(root, ignore_errors=True)
        if args.mirror:
            shutil.rmtree(mirror, ignore_errors=True)
    a, b = statistics.median(plain), statistics.median(mirrored)
    print(f"state {args.mb} MiB, {args.repeats} saves each, interleaved, medians")
    print(f"save, no mirror          {a:8.3f} s")
    print(f"save + verified flush    {b:8.3f} s")
    print(f"mirror ratio             {b / a:8.2f}x   (flush alone {b - a:.3f} s, "
          f"{args.mb / max(b - a, 1e-9):.0f} MiB/s)")  # fmt: skip


if __name__ == "__main__":
    main()
