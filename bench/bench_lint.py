"""`rgt lint` vs `ruff check` on the same 50,000-line training repository, in one run.

    .venv/bin/python bench/bench_lint.py [--lines 50000] [--repeats 5]

The repository is built from the real scripts of tests/lint/corpus (copied as ``.py`` files into
folders until the tree holds ``--lines`` lines). Both tools run as a user runs them, one process
each, interleaved A B A B ... so machine load hits both alike; medians are reported three
times: cold (``rgt lint --no-cache`` vs ``ruff check --no-cache``), first (the default command
with both caches emptied before each run, so each tool also writes its cache) and warm (the
default command, each tool's cache primed by one run first; rgt's under a private
``RGT_HOME``, ruff's in the tree). Goals: rgt lint <= 2 s and <= 3x ruff.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "lint" / "corpus"


def build_tree(target: Path, lines: int) -> tuple[int, int]:
    """Copy the corpus scripts (not the notebooks) into ``target`` until ``lines`` lines."""
    scripts = sorted(p for p in CORPUS.glob("*/*.py.txt"))
    total = files = 0
    while total < lines:
        for script in scripts:
            folder = target / f"pkg{files // 40}"
            folder.mkdir(exist_ok=True)
            shutil.copyfile(script, folder / f"m{files}_{script.name[:-4]}")
            total += script.read_text().count("\n")
            files += 1
            if total >= lines:
                break
    return total, files


def timed(argv: list[str], home: Path, empty: Path | None = None) -> float:
    """Seconds ``argv`` takes; ``empty``: a cache folder removed first (not timed)."""
    if empty is not None:
        shutil.rmtree(empty, ignore_errors=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "RGT_HOME": str(home)}
    start = time.perf_counter()
    subprocess.run(argv, capture_output=True, env=env, check=False, timeout=600)
    return time.perf_counter() - start


def compare(
    label: str,
    rgt: list[str],
    ruff: list[str],
    repeats: int,
    home: Path,
    caches: tuple[Path, Path] | None = None,
) -> None:
    """``caches``: rgt's and ruff's cache folders, emptied before each run."""
    rgt_times, ruff_times = [], []
    for _ in range(repeats):
        rgt_times.append(timed(rgt, home, caches[0] if caches else None))
        ruff_times.append(timed(ruff, home, caches[1] if caches else None))
    rgt_s, ruff_s = statistics.median(rgt_times), statistics.median(ruff_times)
    runs = ", ".join(f"{t:.2f}" for t in rgt_times)
    print(f"{label}: rgt lint   median {rgt_s:6.2f} s  (runs {runs})")
    runs = ", ".join(f"{t:.2f}" for t in ruff_times)
    print(f"{label}: ruff check median {ruff_s:6.2f} s  (runs {runs})")
    print(f"{label}: ratio rgt/ruff {rgt_s / ruff_s:.2f}x  (goal <= 3x); rgt lint goal <= 2 s")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lines", type=int, default=50_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    ruff = shutil.which("ruff") or str(Path(sys.executable).parent / "ruff")
    with tempfile.TemporaryDirectory() as tmp:
        tree, home = Path(tmp, "repo"), Path(tmp, "home")
        tree.mkdir()
        lines, files = build_tree(tree, args.lines)
        print(f"tree: {lines} lines in {files} files; load average {os.getloadavg()[0]:.1f}")
        rgt = [sys.executable, "-m", "rgt.cli", "lint", "--json", str(tree)]
        check = [ruff, "check", "--exit-zero", "--quiet", str(tree)]
        compare("cold", [*rgt, "--no-cache"], [*check, "--no-cache"], args.repeats, home)
        caches = (home / "cache" / "lint", tree / ".ruff_cache")
        compare("first", rgt, check, args.repeats, home, caches)
        timed(rgt, home), timed(check, home)  # prime both caches
        compare("warm", rgt, check, args.repeats, home)
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
