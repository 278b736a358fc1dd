"""Bug triggers of a comparison: reasons the numbers cannot be compared at all.

Each probe returns ``Finding`` records; any finding of severity ``bug`` turns the verdict of
`rgt verify compare` into ``suspect_bug``, whatever the statistics say. These are the ways a
"significant improvement" most often turns out to be an accident: a CPU smoke run or a job that
was killed early mixed into a group, a metric that cannot take the value it reports, seeds that
were never applied (identical numbers on every seed), two groups evaluated on different test
sets, or a jump no config change could cause.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

from rgt.results import RunResults
from rgt.verify.directions import FRACTION, bounds_of
from rgt.verify.findings import Finding
from rgt.verify.stats import NOISE_BUG_SD

SHORT_RUN_FRACTION = 0.5


def run_findings(runs: Sequence[RunResults], metric: str) -> list[Finding]:
    """Probes that look at the runs themselves, both groups together."""
    return [
        *_smoke(runs),
        *_short(runs),
        *_impossible(runs, metric),
        *_split_mismatch(runs, metric),
    ]


def _smoke(runs: Sequence[RunResults]) -> list[Finding]:
    smoke = tuple(r.label for r in runs if r.smoke)
    if not smoke:
        return []
    return [
        Finding(
            "smoke_run",
            "bug",
            f"{len(smoke)} smoke run(s) mixed into the comparison: "
            "1-2 batches on CPU say nothing about the metric",
            smoke,
        )
    ]


def _short(runs: Sequence[RunResults]) -> list[Finding]:
    steps = {r.label: r.steps for r in runs if r.steps is not None}
    if not steps:
        return []
    most = max(steps.values())
    short = {label: s for label, s in steps.items() if s < SHORT_RUN_FRACTION * most}
    if not short:
        return []
    return [
        Finding(
            "short_run",
            "bug",
            f"{len(short)} run(s) trained for less than half the steps of the longest ({most}): "
            "under-trained runs compared with finished ones",
            tuple(short),
            {"steps": short, "max_steps": most},
        )
    ]


def _impossible(runs: Sequence[RunResults], metric: str) -> list[Finding]:
    values = {r.label: r.metric(metric).value for r in runs}
    bad = {label: v for label, v in values.items() if not math.isfinite(v)}
    findings = []
    if bad:
        findings.append(
            Finding(
                "non_finite",
                "bug",
                f"{metric} is NaN or infinite in {len(bad)} run(s)",
                tuple(bad),
                {"values": _jsonable(bad)},
            )
        )
    bounds = bounds_of(metric)
    finite = {label: v for label, v in values.items() if math.isfinite(v)}
    if bounds is not None and finite:
        findings += _out_of_range(metric, finite, *bounds)
    return findings


def _out_of_range(
    metric: str, values: dict[str, float], word: str, low: float, high: float
) -> list[Finding]:
    if word in FRACTION and all(1.0 < v <= 100.0 for v in values.values()):
        # Every run records a fraction in percent (92.3 for 0.923): consistent, so comparable.
        return [
            Finding(
                "percent_scale",
                "info",
                f"{metric} is recorded in percent in every run",
                tuple(values),
            )
        ]
    out = {label: v for label, v in values.items() if not low <= v <= high}
    if not out:
        return []
    return [
        Finding(
            "impossible_value",
            "bug",
            f"{metric} outside its possible range [{low:g}, {high:g}] in {len(out)} run(s)"
            + (" (fractions and percent mixed?)" if word in FRACTION else ""),
            tuple(out),
            {"values": out, "range": [low, high]},
        )
    ]


def _split_mismatch(runs: Sequence[RunResults], metric: str) -> list[Finding]:
    splits = {r.label: r.metric(metric).split for r in runs}
    if len(set(splits.values())) <= 1:
        return []
    return [
        Finding(
            "split_mismatch",
            "bug",
            f"{metric} was computed on different splits: "
            f"{sorted({str(s) for s in splits.values()})}",
            tuple(splits),
            {"splits": splits},
        )
    ]


def data_findings(a: Sequence[RunResults], b: Sequence[RunResults], metric: str) -> list[Finding]:
    """Different content hashes of a split between the groups: not the same data."""
    split = a[0].metric(metric).split
    findings = []
    for name in sorted({k for r in [*a, *b] for k in r.raw.get("data", {})}):
        hashes = {r.raw.get("data", {}).get(name) for r in [*a, *b]} - {None}
        if len(hashes) > 1:
            severity = "bug" if name == split or name == "test" else "warning"
            findings.append(
                Finding(
                    "data_mismatch",
                    severity,
                    f"split {name!r} has {len(hashes)} different content hashes across the runs",
                    evidence={"split": name, "hashes": sorted(hashes)},
                )
            )
    return findings


def seed_findings(group: str, runs: Sequence[RunResults]) -> list[Finding]:
    seeds = Counter(r.seed for r in runs if r.seed is not None)
    findings = []
    dupes = sorted(seed for seed, count in seeds.items() if count > 1)
    if dupes:
        # Runs that share a seed are one replication run twice (the same data order, init and
        # dropout), so their spread is not seed noise: the statistics would be on fake n.
        shared = ", ".join(f"seed {seed} ({seeds[seed]} runs)" for seed in dupes)
        findings.append(
            Finding(
                "duplicate_seed",
                "bug",
                f"group {group} repeats {shared}: runs that share a seed are not independent "
                f"replications, so group {group} has {len(seeds)} independent seed(s), not "
                f"{len(runs)}; give each run its own seed",
                tuple(r.label for r in runs if r.seed in dupes),
                {"duplicated_seeds": dupes, "independent_seeds": len(seeds), "runs": len(runs)},
            )
        )
    unseeded = tuple(r.label for r in runs if r.seed is None)
    if unseeded:
        findings.append(
            Finding(
                "missing_seed",
                "warning",
                f"group {group}: {len(unseeded)} run(s) "
                "record no seed, so replication cannot be checked",
                unseeded,
            )
        )
    return findings


def noise_findings(
    group_values: dict[str, list[float]], delta: float, pooled_sd: float, metric: str
) -> list[Finding]:
    findings = []
    for group, values in group_values.items():
        if len(set(values)) == 1:
            findings.append(
                Finding(
                    "zero_spread",
                    "bug",
                    f"{metric} is identical ({values[0]:g}) "
                    f"on every seed of group {group}: the seed was not applied, "
                    "or the same checkpoint was evaluated",
                    evidence={"group": group, "values": values},
                )
            )
    if pooled_sd > 0 and abs(delta) > NOISE_BUG_SD * pooled_sd:
        findings.append(
            Finding(
                "delta_outside_noise",
                "bug",
                f"the delta is {abs(delta) / pooled_sd:.0f} seed standard deviations: far outside "
                "what one config change does; check the evaluation data and the metric code",
                evidence={"delta": delta, "pooled_sd": pooled_sd, "threshold_sd": NOISE_BUG_SD},
            )
        )
    return findings


def _jsonable(values: dict[str, float]) -> dict[str, str]:
    return {label: repr(v) for label, v in values.items()}
