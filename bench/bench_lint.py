"""`rgt lint` vs `ruff check` on the same 50,000-line training repository, in one run.

    .venv/bin/python bench/bench_lint.py [--lines 50000] [--repeats 5]

The repository is built from the real scripts of tests/lint/corpus (copied as ``.py`` files into
folders until the tree holds ``--lines`` lines). Both tools run as a user runs them, one process
each, interleaved A B A B ... so machine load hits both alike; medians are reported three
times: cold (``rgt lint --no-cache`` vs ``ruff check --no-cache``), first (the default command
with both caches emptied before each run, so each tool also writes its cache) and warm (the
default command, each tool's cache primed by one run first; rgt's under a private
``RGT_HOME``, ruff's in the tree). Goals: rgt lint <= 2 s and <= 3x ruff.
rgt's modules are byte-compiled first, as an install leaves them (with
``PYTHONDONTWRITEBYTECODE`` set and stale bytecode, every run would compile them again).

``--tree DIR`` lints a copy of a real repository instead; ``--before SRC`` also times rgt from
another source tree (``git worktree add /tmp/before COMMIT``, then ``--before /tmp/before/src``),
interleaved with the current one, for a before/after on the same minutes of the machine.
``--python EXE`` (repeatable) also times rgt under another interpreter that has rgt's
dependencies installed (a venv of the distribution's ``python3``: ``python3 -m venv V && V/bin/pip
install -e .``), interleaved too: how fast the parser and the rules run depends on how the
interpreter was built (with or without profile-guided optimisation, libpython shared or not).
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
from dataclasses import dataclass
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


def timed(argv: list[str], home: Path, src: Path, empty: Path | None = None) -> float:
    """Seconds ``argv`` takes with rgt from ``src``; ``empty``: a folder removed first (not
    timed)."""
    if empty is not None:
        shutil.rmtree(empty, ignore_errors=True)
    env = {**os.environ, "PYTHONPATH": str(src), "RGT_HOME": str(home)}
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, env=env, check=False, timeout=600)
    spent = time.perf_counter() - start
    if done.returncode not in (0, 1):  # 1: rgt lint found a bug; anything else is no timing
        sys.exit(f"{argv[:3]} failed ({done.returncode}): {done.stderr.decode()[-2000:]}")
    return spent


def compare(label: str, runs: list[Run], repeats: int) -> None:
    """Each run ``repeats`` times, interleaved; the medians, the last run's the reference."""
    times: list[list[float]] = [[] for _ in runs]
    for _ in range(repeats):
        for run, spent in zip(runs, times, strict=True):
            spent.append(timed(run.argv, run.home, run.src, run.empty))
    ruff_s = statistics.median(times[-1])
    for run, spent in zip(runs, times, strict=True):
        median = statistics.median(spent)
        each = ", ".join(f"{t:.2f}" for t in spent)
        print(f"{label}: {run.name:16s} median {median:6.2f} s  {median / ruff_s:5.2f}x  ({each})")
    print(f"{label}: goals: rgt lint <= 3x ruff check and <= 2 s")


@dataclass
class Run:
    name: str
    argv: list[str]
    home: Path
    src: Path = ROOT / "src"
    empty: Path | None = None


def _describe(python: str) -> str:
    """The interpreter's version and build (``platform.python_build()``)."""
    code = "import platform; print(platform.python_version(), *platform.python_build())"
    done = subprocess.run([python, "-c", code], capture_output=True, text=True, check=False)
    return done.stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lines", type=int, default=50_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--tree", type=Path, help="a repository to lint (copied) instead")
    parser.add_argument("--before", type=Path, help="also time rgt from this src/ (a worktree)")
    parser.add_argument("--python", action="append", default=[], help="also rgt under this")
    args = parser.parse_args()
    ruff = shutil.which("ruff") or str(Path(sys.executable).parent / "ruff")
    with tempfile.TemporaryDirectory() as tmp:
        tree, home, old_home = Path(tmp, "repo"), Path(tmp, "home"), Path(tmp, "home-before")
        if args.tree:
            shutil.copytree(args.tree, tree, symlinks=True, ignore=shutil.ignore_patterns(".git"))
            files = list(tree.rglob("*.py"))
            lines = sum(p.read_bytes().count(b"\n") for p in files)
            print(f"tree: {args.tree}, {lines} lines in {len(files)} .py files")
        else:
            tree.mkdir()
            lines, count = build_tree(tree, args.lines)
            print(f"tree: {lines} lines in {count} files")
        print(f"load average {os.getloadavg()[0]:.1f}")
        for n, python in enumerate([sys.executable, *args.python]):
            print(f"python{n + 1 if n else ''}: {python} {_describe(python)}")
            for src in filter(None, (ROOT / "src", args.before)):  # as pip leaves an install
                subprocess.run([python, "-m", "compileall", "-q", str(src)], check=True)
        # As a user runs it: the ``rgt`` script (bin/rgt), on the interpreter given.
        rgt = [sys.executable, str(ROOT / "bin" / "rgt"), "lint", "--json", str(tree)]
        check = [ruff, "check", "--exit-zero", "--quiet", str(tree)]
        rgt_cache, ruff_cache = home / "cache" / "lint", tree / ".ruff_cache"

        def runs(extra: list[str], first: bool = False) -> list[Run]:
            """Before (if asked), now, ruff; ``first``: each one's cache emptied first."""
            old_cache = old_home / "cache" / "lint"
            found = [Run("rgt lint", [*rgt, *extra], home, empty=rgt_cache if first else None)]
            for n, python in enumerate(args.python):
                own = Path(tmp, f"home-python{n + 2}")
                other = Run(f"rgt lint python{n + 2}", [python, *rgt[1:], *extra], own)
                other.empty = own / "cache" / "lint" if first else None
                found.append(other)
            if args.before:
                before = Run("rgt lint before", [*rgt, *extra], old_home, args.before)
                before.empty = old_cache if first else None
                found.insert(0, before)
            ruff_run = Run("ruff check", [*check, *extra], home)
            ruff_run.empty = ruff_cache if first else None
            return [*found, ruff_run]

        compare("cold", runs(["--no-cache"]), args.repeats)
        compare("first", runs([], first=True), args.repeats)
        for run in runs([]):  # prime every cache
            timed(run.argv, run.home, run.src)
        compare("warm", runs([]), args.repeats)
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
