"""`rgt verify compare`: is B different from A, or is it seed noise, or a bug?

Verdicts, in order of precedence:

    suspect_bug           a bug probe fired (sanity.py); the statistics are not interpreted
    unknown_direction     no direction for the metric; numbers are shown, no verdict
    effect                Welch 95 % CI of mean(B) - mean(A) excludes 0
    no_meaningful_effect  the 90 % CI lies inside ±SESOI (TOST), given ``sesoi``
    inconclusive          neither: more seeds needed (``seeds_needed`` says how many)

Every verdict carries the minimum detectable effect at 80 % power for the seeds at hand, so an
"inconclusive" with MDE 2 dB says plainly that three seeds could never have seen 0.3 dB.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rgt.errors import UsageError
from rgt.results import RunResults, find_runs
from rgt.verify import runtime, sanity, stats
from rgt.verify.configdiff import ConfigDiff, diff_configs
from rgt.verify.directions import registry_direction
from rgt.verify.findings import Finding, has_bug


@dataclass(frozen=True)
class Comparison:
    verdict: str
    metric: str
    direction: str | None
    delta: float  # mean(B) - mean(A), in the metric's units
    ci: tuple[float, float]  # (1 - alpha) Welch CI of delta
    p_value: float
    mde: float  # smallest |delta| detected with 80 % power at n_a, n_b and this seed noise
    seeds_needed: int | None  # seeds per group to detect the observed |delta| with 80 % power
    n_a: int
    n_b: int
    mean_a: float
    mean_b: float
    sd_a: float
    sd_b: float
    sesoi: float | None
    alpha: float
    changed_keys: tuple[str, ...]
    findings: tuple[Finding, ...]
    explanation: str

    def to_json(self) -> dict[str, Any]:
        data = {k: _finite_or_none(v) for k, v in vars(self).items()}
        data["ci"] = [_finite_or_none(x) for x in self.ci]
        data["changed_keys"] = list(self.changed_keys)
        data["findings"] = [f.to_json() for f in self.findings]
        return data


def _finite_or_none(value: Any) -> Any:
    return None if isinstance(value, float) and not math.isfinite(value) else value


def compare(a: str, b: str, metric: str, **options: Any) -> Comparison:
    """Compare two run specs (a run directory, a directory of runs, or a glob)."""
    return compare_runs(find_runs(a), find_runs(b), metric, **options)


def compare_runs(
    a: Sequence[RunResults],
    b: Sequence[RunResults],
    metric: str,
    *,
    direction: str | None = None,
    sesoi: float | None = None,
    alpha: float = stats.ALPHA,
) -> Comparison:
    _check_groups(a, b, sesoi)
    values_a = [r.metric(metric).value for r in a]
    values_b = [r.metric(metric).value for r in b]
    w = stats.welch(values_a, values_b, alpha)
    pooled = math.sqrt((float(w.sd_a) ** 2 + float(w.sd_b) ** 2) / 2)
    delta = float(w.delta)
    resolved, direction_notes = _direction(metric, [*a, *b], direction)
    diff = diff_configs([r.config for r in a], [r.config for r in b])
    findings = [
        *sanity.run_findings([*a, *b], metric),
        *sanity.data_findings(a, b, metric),
        *sanity.seed_findings("A", a),
        *sanity.seed_findings("B", b),
        *sanity.noise_findings({"A": values_a, "B": values_b}, delta, pooled, metric),
        *_config_findings(diff),
        *runtime.knob_findings(list(a), list(b), diff.changed_keys),
        *direction_notes,
    ]
    verdict = _verdict(values_a, values_b, findings, resolved, sesoi, alpha)
    mde = stats.mde(pooled, len(a), len(b), alpha) if math.isfinite(pooled) else math.nan
    needed = stats.seeds_needed(delta, pooled, alpha) if math.isfinite(delta) else None
    result = Comparison(
        verdict,
        metric,
        resolved,
        delta,
        (float(w.lo), float(w.hi)),
        float(w.p),
        mde,
        needed,
        len(a),
        len(b),
        sum(values_a) / len(a),
        sum(values_b) / len(b),
        float(w.sd_a),
        float(w.sd_b),
        sesoi,
        alpha,
        tuple(diff.changed_keys),
        tuple(findings),
        "",
    )
    return _explained(result)


def _check_groups(a: Sequence[RunResults], b: Sequence[RunResults], sesoi: float | None) -> None:
    for group, runs in (("A", a), ("B", b)):
        if len(runs) < 2:
            raise UsageError(
                f"group {group} has {len(runs)} run(s); seed noise needs at least 2 per group",
                fix="run more seeds of that variant (3 or more), then compare again",
            )
    shared = {r.path for r in a if r.path} & {r.path for r in b if r.path}
    if shared:
        raise UsageError(
            f"{len(shared)} run(s) are in both groups, e.g. {sorted(shared)[0]}",
            fix="give A and B disjoint run directories or globs",
        )
    if sesoi is not None and not sesoi > 0:
        raise UsageError(
            f"--sesoi must be positive, not {sesoi}",
            fix="pass the smallest delta that would matter, in metric units",
        )


def _direction(
    metric: str, runs: Sequence[RunResults], override: str | None
) -> tuple[str | None, list[Finding]]:
    declared = {d for r in runs if (d := r.metric(metric).direction) is not None}
    notes = []
    if len(declared) > 1:
        notes.append(
            Finding(
                "direction_conflict",
                "warning",
                f"runs declare different directions for {metric}: {sorted(declared)}",
            )
        )
    if override is not None:
        return override, notes
    if len(declared) == 1:
        return declared.pop(), notes
    return (None if declared else registry_direction(metric)), notes


def _config_findings(diff: ConfigDiff) -> list[Finding]:
    findings = []
    if len(diff.changed) > 1:
        findings.append(
            Finding(
                "multiple_changes",
                "warning",
                f"{len(diff.changed)} config keys differ between the groups "
                f"({', '.join(diff.changed_keys)}): the delta cannot be attributed to one of them",
                evidence={k: {"A": va, "B": vb} for k, (va, vb) in diff.changed.items()},
            )
        )
    elif not diff.changed:
        findings.append(
            Finding(
                "no_config_change",
                "info",
                "the groups' configs do not differ "
                "besides the seed (an A/A comparison, or configs not recorded)",
            )
        )
    for group, keys in (("A", diff.varies_in_a), ("B", diff.varies_in_b)):
        if keys:
            findings.append(
                Finding(
                    "config_varies_in_group",
                    "warning",
                    f"runs of group {group} "
                    f"differ in {', '.join(keys)} besides the seed: they are not "
                    "replications of one configuration",
                    evidence={"keys": keys},
                )
            )
    return findings


def _verdict(
    values_a: list[float],
    values_b: list[float],
    findings: list[Finding],
    direction: str | None,
    sesoi: float | None,
    alpha: float,
) -> str:
    statistical = str(stats.verdicts([values_a], [values_b], sesoi=sesoi, alpha=alpha)[0])
    if has_bug(findings) or statistical == "suspect_bug":
        return "suspect_bug"
    if direction is None:
        return "unknown_direction"
    return statistical


def _explained(c: Comparison) -> Comparison:
    from dataclasses import replace

    from rgt.verify._explain import explain

    return replace(c, explanation=explain(c))
