"""The per-job working directory and the artifact manifest, side by side with coreutils.

    .venv/bin/python bench/bench_workdir.py [--files 10000] [--gib 1.0] [--rounds 3]

Two numbers (goals from issue 12):
  1. creating ``work/`` from a 10,000-file, 1 GiB snapshot (rgt.agent._workdir.ensure) vs
     `cp -a` (full copy) and `cp -al` (hard-link farm): seconds (goal <= 0.5 s) and extra disk
     (blocks of new inodes only, goal <= 5 % of the snapshot); an overlay mount is timed too
     when this machine allows one. Warm page cache for all of them, rounds interleaved.
  2. manifest + hash of a job's outputs (rgt.agent._manifest.finalize: collect, sha256, re-read
     every file, write manifest.json) vs `sha256sum` of the same files (goal <= 1.2x), and vs
     one pass of Python's hashlib, so the cost of the re-read is visible.
The snapshot: 50 large files (weights, data shards) hold most of the bytes; the rest are small
(0.5-6 KiB) in 50 folders, ``--code-share`` of them code (.py/.md: shared by hard link), the
others configs and data (.json/.yaml/.txt/.csv: copied). A real repository is mostly code (0.8).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from rgt import _fs  # noqa: E402
from rgt.agent import _manifest, _workdir  # noqa: E402
from rgt.agent.paths import JobPaths  # noqa: E402

MIB = 1 << 20
CODE = (".py", ".py", ".py", ".md")  # shared by hard link
DATA = (".json", ".yaml", ".txt", ".csv")  # copied (a script may rewrite them)


def make_snapshot(root: Path, files: int, total: int, code_share: float) -> None:
    rng = random.Random(12)
    large = 50
    small_sizes = [rng.randint(512, 6 * 1024) for _ in range(files - large)]
    big = (total - sum(small_sizes)) // large
    for index, size in enumerate(small_sizes):
        kinds = CODE if rng.random() < code_share else DATA
        path = root / f"pkg{index % 50:02d}" / f"mod{index:05d}{kinds[index % 4]}"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(os.urandom(size))
    (root / "weights").mkdir()
    for index in range(large):
        (root / "weights" / f"shard-{index:02d}.bin").write_bytes(os.urandom(big))
    for path in root.rglob("*"):  # read-only, as materialize() leaves a snapshot
        if path.is_file():
            path.chmod(0o444)


def new_bytes(dest: Path, snapshot_inodes: set[int]) -> int:
    """Disk taken by ``dest``: blocks of every inode that the snapshot does not own."""
    used = 0
    for dirpath, _dirnames, filenames in os.walk(dest):
        used += os.lstat(dirpath).st_blocks * 512
        for name in filenames:
            st = os.lstat(os.path.join(dirpath, name))
            if st.st_ino not in snapshot_inodes:
                used += st.st_blocks * 512
    return used


def disk_of(root: Path) -> tuple[int, set[int]]:
    used, inodes = 0, set()
    for path in root.rglob("*"):
        st = path.lstat()
        used += st.st_blocks * 512
        inodes.add(st.st_ino)
    return used, inodes


def rgt_workdir(snapshot: Path, dest: Path) -> None:
    job = dest / "job"
    job.mkdir(parents=True)
    os.symlink(snapshot, job / "code")
    result = _workdir.ensure(JobPaths(str(job), "bench"))
    assert isinstance(result, dict), result
    (job / "work").rename(dest / "work")


def cp(flags: str) -> Callable[[Path, Path], None]:
    def run(snapshot: Path, dest: Path) -> None:
        dest.mkdir()
        subprocess.run(["cp", flags, f"{snapshot}/.", str(dest / "work")], check=True)

    return run


def overlay(snapshot: Path, dest: Path) -> None:
    for name in ("upper", "ovl", "work"):
        (dest / name).mkdir(parents=True)
    opts = f"lowerdir={snapshot},upperdir={dest}/upper,workdir={dest}/ovl"
    argv = ["mount", "-t", "overlay", "overlay", "-o", opts, str(dest / "work")]
    subprocess.run(argv, check=True, capture_output=True)


def remove(dest: Path) -> None:
    if (dest / "work").is_mount():
        subprocess.run(["umount", str(dest / "work")], check=True)
    _workdir.remove_tree(str(dest))


def overlay_works(base: Path, snapshot: Path) -> bool:
    probe = base / "probe"
    try:
        overlay(snapshot, probe)
    except (subprocess.CalledProcessError, OSError):
        shutil.rmtree(probe, ignore_errors=True)
        return False
    remove(probe)
    return True


def bench_workdir(base: Path, snapshot: Path, rounds: int) -> None:
    snap_bytes, inodes = disk_of(snapshot)
    methods = {"rgt work/": rgt_workdir, "cp -a": cp("-a"), "cp -al": cp("-al")}
    if overlay_works(base, snapshot):
        methods["overlay mount"] = overlay
    times: dict[str, list[float]] = {name: [] for name in methods}
    extra: dict[str, int] = {}
    for round_no in range(rounds):
        for name, make in methods.items():
            dest = base / f"{round_no}-{name.replace(' ', '_').replace('/', '')}"
            start = time.perf_counter()
            make(snapshot, dest)
            times[name].append(time.perf_counter() - start)
            extra[name] = new_bytes(dest / "work", inodes) if "overlay" not in name else 0
            remove(dest)
    print(f"snapshot: {snap_bytes / MIB:.0f} MiB on disk")
    rgt_best = min(times["rgt work/"])
    for name, values in times.items():
        print(
            f"  {name:14s} best {min(values):7.3f} s  median {statistics.median(values):7.3f} s"
            f"  extra disk {extra[name] / MIB:8.1f} MiB ({100 * extra[name] / snap_bytes:5.1f} %)"
            f"  rgt/this {rgt_best / min(values):5.2f}x"
        )


def bench_manifest(base: Path, rounds: int) -> None:
    job = base / "job"
    out = job / "outputs"
    out.mkdir(parents=True)
    for index in range(8):
        (out / f"ckpt-{index}.pt").write_bytes(os.urandom(64 * MIB))
    for index in range(200):
        (out / f"sample-{index:03d}.png").write_bytes(os.urandom(256 * 1024))
    files = sorted(str(p) for p in out.iterdir())
    paths = JobPaths(str(job), "bench")
    rgt_t, coreutils_t, hashlib_t = [], [], []
    for _ in range(rounds):
        start = time.perf_counter()
        assert _manifest.finalize(paths, "succeeded", []).ok
        rgt_t.append(time.perf_counter() - start)
        start = time.perf_counter()
        subprocess.run(["sha256sum", *files], check=True, stdout=subprocess.DEVNULL)
        coreutils_t.append(time.perf_counter() - start)
        start = time.perf_counter()
        for path in files:
            _fs.sha256_file(path)
        hashlib_t.append(time.perf_counter() - start)
    size = sum(os.path.getsize(f) for f in files)
    print(f"manifest of {len(files)} files, {size / MIB:.0f} MiB:")
    print(f"  rgt finalize   best {min(rgt_t):.3f} s (hash + re-read + manifest + DONE)")
    best = min(rgt_t)
    core = min(coreutils_t)
    print(f"  sha256sum      best {core:.3f} s  rgt/sha256sum {best / core:.2f}x")
    print(f"  hashlib 1 pass best {min(hashlib_t):.3f} s  rgt/hashlib {best / min(hashlib_t):.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=10000)
    parser.add_argument("--gib", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dir", default=None, help="where to build (default: $TMPDIR)")
    parser.add_argument(
        "--code-share", type=float, default=0.8, help="share of small files that are code"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="rgt-bench-workdir-", dir=args.dir) as tmp:
        base = Path(tmp)
        snapshot = base / "code" / "snap"
        make_snapshot(snapshot, args.files, int(args.gib * 1024 * MIB), args.code_share)
        print(f"{args.files} files, {args.gib:g} GiB, {args.code_share:.0%} of small files code")
        bench_workdir(base / "dest", snapshot, args.rounds)
        bench_manifest(base / "manifest", args.rounds)


if __name__ == "__main__":
    main()
