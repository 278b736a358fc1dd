"""How long ``rgt --help`` takes to start, against a bare ``python -c pass``, in one run.

    .venv/bin/python bench/bench_cli_start.py [--runs 30] [--before SRC]

Each row is a fresh process of the installed command (``.venv/bin/rgt``: ``bin/rgt``, a plain
script that does ``from rgt.cli import main``), stdout and stderr to /dev/null, started
``--runs`` times; the rows are interleaved (every round runs each once, in a rotated order) so
the machine's load hits all alike. Each row reports its wall-clock median and fastest run and
its median CPU time (the child's user + system, less moved by other processes' load), the
medians also as multiples of the bare interpreter's. "Cold" means a new interpreter every time;
the operating system's file cache is warm, as it is for a person typing the command twice. rgt's
modules are byte-compiled first, as an install leaves them. Goal (issue 34): ``rgt --help`` <=
1.5x bare python; the report also gives rgt's own part (``python -c "from rgt.cli import main;
main()" --help``, no wrapper) and ``rgt --help`` less the wrapper's floor.

Rows: ``python -c pass``; ``python -c "import re"`` (what a pip console-script wrapper does
before it imports anything: the floor rgt avoids by installing ``bin/rgt`` instead); ``rgt
--help``, ``-h``, ``--version`` and ``rgt`` alone (answered without click); ``rgt run --help``
and ``rgt lint --help`` (a command's help, through click, for reference). ``--before SRC`` adds
``rgt --help`` (console script and ``python -c``) and ``rgt --version`` from another source tree
(``git archive COMMIT src | tar -x -C /tmp/before``, then ``--before /tmp/before/src``), for a
before/after on the same minutes."""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RGT = Path(sys.executable).with_name("rgt")
GOAL = 1.5
# rgt's own start-up without the console script's wrapper (and its ``import re``).
MAIN = "from rgt.cli import main; main()"


def rows(before: Path | None) -> dict[str, tuple[list[str], dict[str, str]]]:
    """Name -> (argv, extra environment)."""
    py, rgt = [sys.executable], [str(RGT)]
    table = {
        "python -c pass": ([*py, "-c", "pass"], {}),
        'python -c "import re"': ([*py, "-c", "import re"], {}),
        "rgt --help": ([*rgt, "--help"], {}),
        "python -c main() --help": ([*py, "-c", MAIN, "--help"], {}),
        "rgt -h": ([*rgt, "-h"], {}),
        "rgt --version": ([*rgt, "--version"], {}),
        "rgt (no arguments)": (rgt, {}),
        "rgt run --help": ([*rgt, "run", "--help"], {}),
        "rgt lint --help": ([*rgt, "lint", "--help"], {}),
    }
    if before is not None:
        old = {"PYTHONPATH": str(before)}
        table["rgt --help (before)"] = ([*rgt, "--help"], old)
        table["python -c main() --help (before)"] = ([*py, "-c", MAIN, "--help"], old)
        table["rgt --version (before)"] = ([*rgt, "--version"], old)
    return table


def once(argv: list[str], extra: dict[str, str]) -> tuple[float, float]:
    """Wall-clock seconds of one run, and the CPU seconds (user + system) the child used."""
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "RGT_DEBUG", "PYTHONPATH")}
    cpu, start = _children_cpu(), time.perf_counter()
    subprocess.run(argv, env={**env, **extra}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start, _children_cpu() - cpu


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


Table = dict[str, tuple[list[str], dict[str, str]]]
Times = dict[str, list[tuple[float, float]]]


def measure(table: Table, runs: int) -> Times:
    names = list(table)
    for name in names:  # byte-compiles what each row imports, warms the file cache
        once(*table[name])
    times: Times = {name: [] for name in names}
    for n in range(runs):
        shift = n % len(names)
        for name in names[shift:] + names[:shift]:
            times[name].append(once(*table[name]))
    return times


def report(times: Times) -> None:
    wall = {name: statistics.median(t[0] for t in runs) for name, runs in times.items()}
    cpu = {name: statistics.median(t[1] for t in runs) for name, runs in times.items()}
    bare = "python -c pass"
    print(
        f"{'command':<34} {'wall median':>11} {'fastest':>8} {'x bare':>6} {'CPU':>7} {'x bare':>6}"
    )
    for name, runs in times.items():
        fastest = min(t[0] for t in runs)
        print(
            f"{name:<34} {wall[name] * 1e3:>9.1f}ms {fastest * 1e3:>6.1f}ms "
            f"{wall[name] / wall[bare]:>5.2f}x {cpu[name] * 1e3:>5.1f}ms "
            f"{cpu[name] / cpu[bare]:>5.2f}x"
        )
    for what, medians in (("wall", wall), ("CPU", cpu)):
        for row in ("rgt --help", "python -c main() --help"):
            ratio = medians[row] / medians[bare]
            verdict = "met" if ratio <= GOAL else "NOT met"
            print(f"goal: {row} <= {GOAL}x bare ({what} medians): {ratio:.2f}x, {verdict}")
        floor = medians["rgt --help"] - medians['python -c "import re"']
        print(f"  rgt --help over a console-script wrapper's floor ({what}): {floor * 1e3:+.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--before", type=Path, help="another tree's src/ (before/after rows)")
    args = parser.parse_args()
    for src in [ROOT / "src", *([args.before] if args.before else [])]:
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(src / "rgt")], check=False)
    load = os.getloadavg()
    times = measure(rows(args.before), args.runs)
    print(f"{sys.executable} ({sys.version.split()[0]}), {args.runs} runs per row, interleaved")
    print(
        f"load average {load[0]:.2f} before, {os.getloadavg()[0]:.2f} after, {os.cpu_count()} CPUs"
    )
    report(times)


if __name__ == "__main__":
    main()
