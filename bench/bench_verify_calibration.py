"""Calibration of `rgt verify compare` next to a naive percentile bootstrap and a plain t-test.

For n = 3, 5, 10 seeds per group: the false-effect rate under a planted null (normal and
heavy-tailed t3 noise) and the power on a planted effect of one seed standard deviation, for

    rgt        the shipped rule (rgt.verify.stats.verdicts: Welch CI + bug triggers)
    t-test     Student's pooled-variance t-test at 5 %
    bootstrap  95 % percentile bootstrap CI of the mean difference excludes 0

Run:  .venv/bin/python bench/bench_verify_calibration.py [--sims 4000] [--boots 1000]
"""

from __future__ import annotations

import argparse
import math
import time
from typing import Any

import numpy as np
from scipy import stats

from rgt.verify.stats import verdicts, welch_power


def noise(rng: np.random.Generator, kind: str, shape: tuple[int, int]) -> Any:
    if kind == "normal":
        return rng.normal(size=shape)
    return rng.standard_t(3, size=shape) / math.sqrt(3)


def rate_rgt(a: Any, b: Any) -> float:
    return float(np.mean(verdicts(a, b) == "effect"))


def rate_ttest(a: Any, b: Any) -> float:
    return float(np.mean(stats.ttest_ind(a, b, axis=1).pvalue < 0.05))


def rate_bootstrap(a: Any, b: Any, boots: int, rng: np.random.Generator) -> float:
    sims, n = a.shape
    hits = 0
    for start in range(0, sims, 500):  # chunks keep memory at ~500 x boots x n
        sa, sb = a[start : start + 500], b[start : start + 500]
        rows = np.arange(len(sa))[:, None, None]
        ia = rng.integers(0, n, size=(len(sa), boots, n))
        ib = rng.integers(0, n, size=(len(sa), boots, n))
        diffs = sb[rows, ib].mean(-1) - sa[rows, ia].mean(-1)
        lo, hi = np.percentile(diffs, [2.5, 97.5], axis=1)
        hits += int(np.sum((lo > 0) | (hi < 0)))
    return hits / sims


def row(n: int, kind: str, delta: float, sims: int, boots: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    a, b = noise(rng, kind, (sims, n)), noise(rng, kind, (sims, n)) + delta
    cells = [rate_rgt(a, b), rate_ttest(a, b), rate_bootstrap(a, b, boots, rng)]
    theory = f"{welch_power(delta, 1.0, n, n):.3f}" if delta and kind == "normal" else "-"
    return [str(n), kind, f"{delta:g}", *(f"{c:.3f}" for c in cells), theory]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sims", type=int, default=4000)
    parser.add_argument("--boots", type=int, default=1000)
    args = parser.parse_args()
    started = time.perf_counter()
    se = math.sqrt(0.05 * 0.95 / args.sims)
    print(
        f"sims per cell: {args.sims} (binomial SE at 5 %: {se:.4f}), bootstrap resamples: "
        f"{args.boots}"
    )
    print("| n | noise | planted delta (sd) | rgt (Welch) | t-test | bootstrap | Welch theory |")
    print("|---|---|---|---|---|---|---|")
    seed = 0
    for delta in (0.0, 1.0):
        for n in (3, 5, 10):
            for kind in ("normal", "t3"):
                seed += 1
                print("| " + " | ".join(row(n, kind, delta, args.sims, args.boots, seed)) + " |")
    wall = time.perf_counter() - started
    print(f"\ndelta 0: false-effect rate; delta 1: power. wall time {wall:.1f} s")


if __name__ == "__main__":
    main()
