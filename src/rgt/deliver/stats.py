"""Aggregates over runs: seeds are the unit of replication, so a claim over n seeds reports the
mean with a 95 % Student-t confidence interval and its n, never a bare mean.

Stdlib only (the CLI imports this): the two-sided 95 % t quantiles for small samples are
tabulated; above 30 degrees of freedom a Cornish-Fisher expansion of the normal quantile is
accurate to better than 1e-4.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from rgt.errors import UsageError

AGGREGATES = ("mean", "median", "max", "min", "value")

# t_{0.975, df} for df = 1..30
_T975 = (
    12.7062, 4.3027, 3.1824, 2.7764, 2.5706, 2.4469, 2.3646, 2.3060, 2.2622, 2.2281,
    2.2010, 2.1788, 2.1604, 2.1448, 2.1314, 2.1199, 2.1098, 2.1009, 2.0930, 2.0860,
    2.0796, 2.0739, 2.0687, 2.0639, 2.0595, 2.0555, 2.0518, 2.0484, 2.0452, 2.0423,
)  # fmt: skip


def t_quantile_975(df: int) -> float:
    if df < 1:
        raise ValueError("a confidence interval needs at least two values")
    if df <= len(_T975):
        return _T975[df - 1]
    z = 1.959963984540054
    terms = (
        (z**3 + z) / 4,
        (5 * z**5 + 16 * z**3 + 3 * z) / 96,
        (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384,
    )
    return float(z + sum(term / df ** (i + 1) for i, term in enumerate(terms)))


@dataclass(frozen=True)
class Summary:
    """A claim's number: ``value`` by the claim's aggregate, plus the spread over its runs."""

    value: float
    n: int
    aggregate: str
    mean: float
    std: float | None  # sample standard deviation; None for one run
    ci_low: float | None  # 95 % CI of the mean; None for one run
    ci_high: float | None

    @property
    def ci_half(self) -> float | None:
        return None if self.ci_high is None else self.ci_high - self.mean


def summarize(values: Sequence[float], aggregate: str = "mean") -> Summary:
    if not values:
        raise UsageError("no values to aggregate", fix="cite at least one run that has the metric")
    if aggregate not in AGGREGATES:
        raise UsageError(
            f"unknown aggregate {aggregate!r} (allowed: {', '.join(AGGREGATES)})",
            fix="use one of the allowed aggregates",
        )
    if aggregate == "value" and len(values) != 1:
        raise UsageError(
            f"aggregate 'value' needs exactly one run, got {len(values)}",
            fix="cite one run, or use mean/median/max/min over several",
        )
    mean = statistics.fmean(values)
    std = statistics.stdev(values) if len(values) > 1 else None
    half = None if std is None else t_quantile_975(len(values) - 1) * std / math.sqrt(len(values))
    return Summary(
        value=_pick(values, aggregate, mean),
        n=len(values),
        aggregate=aggregate,
        mean=mean,
        std=std,
        ci_low=None if half is None else mean - half,
        ci_high=None if half is None else mean + half,
    )


def _pick(values: Sequence[float], aggregate: str, mean: float) -> float:
    if aggregate == "median":
        return float(statistics.median(values))
    if aggregate == "max":
        return max(values)
    if aggregate == "min":
        return min(values)
    return values[0] if aggregate == "value" else mean
