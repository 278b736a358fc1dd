"""Triage benchmark: the corpus confusion table, the generalization corpus by half (per-label
precision and recall), and throughput on a generated 100 MB log.

    .venv/bin/python bench/bench_triage.py [--mb 100] [--corpus-only] [--half tune|test|late|both]

``--half late`` scores the late batch (``tests/triage/public_late``, frozen before it was first
scored) with the same tables as the test half, then lists each miss (source, expected, got).

Three timings on the same generated log (training lines, warnings, an OOM traceback at the end):
``tail``  what rgt does: ``classify(read_tail(path))`` — reads only the last 256 KiB;
``scan``  the whole file through the same rule base: ``rgt.triage.scan.scan_file`` (GNU grep
          as the prefilter, the exact rules on the lines it passes; its CPU is counted);
``grep``  ``grep -E -c`` over the whole file with the same patterns, translated to ERE (patterns
          with lookarounds or ``\\r`` have no ERE form and are counted as skipped). One run each.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import resource
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.triage.public_corpus import PublicLog, load_late, load_public  # noqa: E402
from tests.triage.triage_corpus import load_corpus  # noqa: E402
from tests.triage.triage_eval import by_round, evaluate, report, summary_line  # noqa: E402

from rgt.triage import (  # noqa: E402
    _grep,
    classify,
    default_rules,
    read_tail,
)
from rgt.triage.scan import scan_file  # noqa: E402


def confusion() -> None:
    table: dict[str, Counter[str]] = defaultdict(Counter)
    fixtures = load_corpus()
    for fx in fixtures:
        table[fx.label][classify(fx.log, fx.exit_code, fx.signal, fx.context).label] += 1
    right = sum(table[label][label] for label in table)
    print(f"corpus: {len(fixtures)} logs, accuracy {right / len(fixtures):.1%} ({right} right)")
    print(f"{'expected':<20}{'n':>4}{'right':>7}  wrong (predicted: count)")
    for label in sorted(table):
        row = table[label]
        wrong = ", ".join(f"{p}: {n}" for p, n in sorted(row.items()) if p != label) or "-"
        print(f"{label:<20}{sum(row.values()):>4}{row[label]:>7}  {wrong}")


def generalization(halves: tuple[str, ...]) -> None:
    """Real public logs the rules were not written from, by half: the scores of ``triage_eval``."""
    for half in halves:
        logs = load_late() if half == "late" else load_public(half)
        print()
        print("\n".join(report(f"{half} half", evaluate(logs))))
        if half == "test":
            for name, subset in by_round(logs).items():
                print(f"  {name}: " + summary_line(evaluate(subset)))
        if half == "late":
            late_misses(logs)


def late_misses(logs: list[PublicLog]) -> None:
    """Each late log the rules got wrong, and the measured total the batch brings the corpus to."""
    print()
    for log, outcome in zip(logs, evaluate(logs).outcomes, strict=True):
        if outcome.got != outcome.want:
            print(f"  miss: {log.source}  want {outcome.want}, got {outcome.got}")
    print(
        f"measured public logs: {len(load_public())} + {len(logs)} late = "
        f"{len(load_public()) + len(logs)}"
    )


def generate(path: Path, megabytes: int) -> None:
    rng = random.Random(7)
    lines = []
    for step in range(20000):
        loss = rng.uniform(0.1, 3.0)
        lines.append(
            f"[2024-05-01 12:{step % 60:02d}:07] step {step} loss {loss:.4f} "
            f"lr {rng.uniform(1e-5, 3e-4):.2e} grad_norm {rng.uniform(0.1, 9):.3f}\n"
        )
        if step % 997 == 0:
            lines.append("UserWarning: The given NumPy array is not writable; error rate 0.01\n")
    block = "".join(lines).encode()
    with path.open("wb") as handle:
        written = 0
        while written < megabytes * 1024 * 1024:
            handle.write(block)
            written += len(block)
        handle.write(
            b'Traceback (most recent call last):\n  File "train.py", line 9\n'
            b"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"
        )


TAIL_KIB = 256
ENDINGS = {
    "cuda_oom at the end": "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2 GiB\n",
    "nan in metric lines": "step 9001 loss nan grad_norm nan lr 3.0e-04\n",
    "no rule fires (unknown)": "worker 3 stopped: peer went away during allreduce\n",
    "INFO loss lines, unknown": "worker 3 stopped: peer went away during allreduce\n",
}


def tail_latency(repeats: int = 30) -> None:
    """What rgt does on every failed job: classify the last 256 KiB. Median and max, wall and
    CPU (the bench machine is shared: CPU is what the code costs, wall what the load adds)."""
    print(f"\nclassify(read_tail()) of a {TAIL_KIB} KiB log, {repeats} runs (goal <= 50 ms wall)")
    with tempfile.TemporaryDirectory() as tmp:
        for name, ending in ENDINGS.items():
            log = Path(tmp) / "attempt-1.log"
            generate_bytes(log, TAIL_KIB * 1024 - len(ending), ending, info="INFO" in name)
            walls, cpus = [], []
            for _ in range(repeats):
                start, cpu = time.perf_counter(), time.process_time()
                label = classify(read_tail(str(log)), exit_code=1).label
                walls.append((time.perf_counter() - start) * 1000)
                cpus.append((time.process_time() - cpu) * 1000)
            walls.sort()
            cpus.sort()
            print(
                f"  {name:<25} wall min {walls[0]:5.1f} median {walls[len(walls) // 2]:6.1f} ms"
                f"  CPU median {cpus[len(cpus) // 2]:5.1f} max {cpus[-1]:5.1f} ms -> {label}"
            )


def generate_bytes(path: Path, size: int, ending: str, info: bool = False) -> None:
    """Training lines (a UserWarning now and then) up to ``size`` bytes, then ``ending``; with
    ``info`` each line carries a logger's INFO level, which holds the literal "inf"."""
    rng = random.Random(7)
    out, written, step = [], 0, 0
    level = " INFO trainer:" if info else ""
    while written < size:
        line = (
            f"[2024-05-01 12:{step % 60:02d}:07]{level} step {step} loss {rng.uniform(0.1, 3):.4f} "
            f"lr {rng.uniform(1e-5, 3e-4):.2e} grad_norm {rng.uniform(0.1, 9):.3f}\n"
        )
        if step % 997 == 0:
            line += "UserWarning: The given NumPy array is not writable; error rate 0.01\n"
        out.append(line)
        written += len(line)
        step += 1
    path.write_text("".join(out)[:size] + "\n" + ending, encoding="utf-8")


def full_scan(path: Path) -> set[str]:
    verdict = scan_file(str(path), exit_code=1)
    return {verdict.label, *verdict.secondary}


def ere_patterns() -> tuple[list[str], list[str], int]:
    sensitive: list[str] = []
    insensitive: list[str] = []
    skipped = 0
    for rule in default_rules():
        for pattern in rule.patterns:
            text = pattern.pattern
            if re.search(r"\(\?[=!<]|\\r", text):
                skipped += 1
                continue
            text = text.replace("(?:", "(").replace(r"\d", "[0-9]")
            (insensitive if pattern.flags & re.IGNORECASE else sensitive).append(text)
    return sensitive, insensitive, skipped


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def grep_scan(path: Path, workdir: Path) -> tuple[float, float, int, int]:
    sensitive, insensitive, skipped = ere_patterns()
    env = dict(os.environ, LC_ALL="C")
    cpu = _children_cpu()
    start = time.perf_counter()
    for flags, patterns in (([], sensitive), (["-i"], insensitive)):
        pattern_file = workdir / f"patterns{len(flags)}.txt"
        pattern_file.write_text("\n".join(patterns) + "\n")
        cmd = ["grep", "-E", "-c", *flags, "-f", str(pattern_file), str(path)]
        subprocess.run(cmd, env=env, capture_output=True, check=False)
    wall = time.perf_counter() - start
    return wall, _children_cpu() - cpu, len(sensitive) + len(insensitive), skipped


def throughput(megabytes: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "attempt-1.log"
        generate(log, megabytes)
        size_mb = log.stat().st_size / 1024 / 1024
        start, cpu = time.perf_counter(), time.process_time()
        verdict = classify(read_tail(str(log)), exit_code=1)
        tail_s, tail_cpu = time.perf_counter() - start, time.process_time() - cpu
        start, cpu = time.perf_counter(), time.process_time() + _children_cpu()
        scanned = full_scan(log)  # its GNU grep prefilter is a child process: counted too
        scan_s = time.perf_counter() - start
        scan_cpu = time.process_time() + _children_cpu() - cpu
        start, cpu = time.perf_counter(), time.process_time()
        with_grep = _grep.gnu_grep
        _grep.gnu_grep = lambda: None  # type: ignore[assignment]  # as where there is no GNU grep
        try:
            python_labels = full_scan(log)
        finally:
            _grep.gnu_grep = with_grep  # type: ignore[assignment]
        py_s, py_cpu = time.perf_counter() - start, time.process_time() - cpu
        grep_s, grep_cpu, translated, skipped = grep_scan(log, Path(tmp))
    print(
        f"\nlog: {size_mb:.1f} MB generated; {sum(len(r.patterns) for r in default_rules())} "
        f"patterns in {len(default_rules())} rules"
    )
    print("(wall clock, then CPU seconds: the bench machine may be shared)")
    print(
        f"tail  classify(read_tail)  {tail_s * 1000:8.1f} ms wall {tail_cpu * 1000:8.1f} ms CPU"
        f"  -> {verdict.label}"
    )
    print(
        f"scan  whole file, engine   {scan_s:8.2f} s  wall {scan_cpu:8.2f} s  CPU"
        f"  {size_mb / scan_cpu:6.1f} MB/s per CPU-s -> {sorted(scanned)}"
    )
    print(
        f"scan  without GNU grep     {py_s:8.2f} s  wall {py_cpu:8.2f} s  CPU"
        f"  {size_mb / py_cpu:6.1f} MB/s per CPU-s -> {sorted(python_labels)}"
    )
    print(
        f"grep  whole file, grep -E  {grep_s:8.2f} s  wall {grep_cpu:8.2f} s  CPU"
        f"  {size_mb / max(grep_cpu, 1e-9):6.1f} MB/s per CPU-s"
        f" ({translated} patterns as ERE, {skipped} without an ERE form skipped)"
    )
    print(
        f"without GNU grep / grep: {py_cpu / max(grep_cpu, 1e-9):.1f}x CPU, "
        f"{py_s / max(grep_s, 1e-9):.1f}x wall"
    )
    print(
        f"scan / grep: {scan_cpu / max(grep_cpu, 1e-9):.1f}x CPU, "
        f"{scan_s / max(grep_s, 1e-9):.1f}x wall (goal <= 3x)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=100, help="size of the generated log")
    parser.add_argument("--corpus-only", action="store_true", help="skip the throughput runs")
    parser.add_argument(
        "--half",
        choices=("tune", "test", "late", "both"),
        default="both",
        help="which half of the public corpus to score (write rules with --half tune only; "
        "late: the late batch, frozen before it was scored)",
    )
    args = parser.parse_args()
    confusion()
    generalization(("tune", "test") if args.half == "both" else (args.half,))
    if not args.corpus_only:
        tail_latency()
        throughput(args.mb)


if __name__ == "__main__":
    main()
