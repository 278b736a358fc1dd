"""The statistics behind `rgt verify compare`: Welch's t, exact Welch power, MDE, TOST.

Seeds are the unit of replication, and three seeds per variant is the common case, so every
quantity here is exact for small n rather than asymptotic. A percentile bootstrap of three values
has a far too narrow interval (it cannot see the tails it never sampled) and calls pure seed noise
an "effect" about a fifth of the time; Welch's t with Satterthwaite degrees of freedom holds its
5 % false-effect rate at n = 3 (see bench/bench_verify_calibration.py).

Every decision function is vectorised over leading axes: ``a`` has shape ``(..., n_a)``. The CLI
calls them with one comparison, the calibration tests with tens of thousands, so the shipped
decision rule is the one that is calibrated. numpy/scipy are imported inside functions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

ALPHA = 0.05
POWER = 0.80
# A delta more than this many seed standard deviations is not a plausible effect of a config
# change; it is a different evaluation set, a leaked label, or a unit error.
NOISE_BUG_SD = 20.0
_GRID = 160


@dataclass(frozen=True)
class Welch:
    """Welch's unequal-variance t test of mean(b) - mean(a); fields are arrays or floats."""

    delta: Any
    se: Any
    df: Any
    p: Any
    lo: Any  # (1 - alpha) confidence interval of the difference
    hi: Any
    sd_a: Any
    sd_b: Any


def welch(a: Any, b: Any, alpha: float = ALPHA) -> Welch:
    import numpy as np
    from scipy import stats

    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    n_a, n_b = a.shape[-1], b.shape[-1]
    var_a, var_b = a.var(axis=-1, ddof=1), b.var(axis=-1, ddof=1)
    qa, qb = var_a / n_a, var_b / n_b
    se = np.sqrt(qa + qb)
    with np.errstate(divide="ignore", invalid="ignore"):
        df = (qa + qb) ** 2 / (qa**2 / (n_a - 1) + qb**2 / (n_b - 1))
        delta = b.mean(axis=-1) - a.mean(axis=-1)
        t = delta / se
    p = 2 * stats.t.sf(np.abs(t), df)
    half = stats.t.ppf(1 - alpha / 2, df) * se
    return Welch(delta, se, df, p, delta - half, delta + half, np.sqrt(var_a), np.sqrt(var_b))


def tost_p(w: Welch, sesoi: float) -> Any:
    """Two one-sided tests against ±sesoi: small p means the true delta lies within ±sesoi."""
    import numpy as np
    from scipy import stats

    with np.errstate(divide="ignore", invalid="ignore"):
        p_low = stats.t.sf((w.delta + sesoi) / w.se, w.df)
        p_high = stats.t.cdf((w.delta - sesoi) / w.se, w.df)
    return np.maximum(p_low, p_high)


def bug_mask(w: Welch) -> Any:
    """Data-only bug triggers: no spread across seeds, or a delta far outside the seed noise."""
    import numpy as np

    pooled = np.sqrt((w.sd_a**2 + w.sd_b**2) / 2)
    zero = (w.sd_a == 0) | (w.sd_b == 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        far = np.abs(w.delta) > NOISE_BUG_SD * pooled
    return zero | far


def verdicts(a: Any, b: Any, *, sesoi: float | None = None, alpha: float = ALPHA) -> Any:
    """The decision rule, vectorised: an array of verdict strings, one per comparison."""
    import numpy as np

    w = welch(a, b, alpha)
    out = np.full(np.shape(w.delta), "inconclusive", dtype=object)
    if sesoi is not None:
        out[tost_p(w, sesoi) < alpha] = "no_meaningful_effect"
    out[(w.p < alpha) & (out == "inconclusive")] = "effect"
    out[bug_mask(w)] = "suspect_bug"
    return out


def welch_power(delta: float, sd: float, n_a: int, n_b: int, alpha: float = ALPHA) -> float:
    """Exact power of the two-sided Welch test for a true difference ``delta``, both groups
    normal with standard deviation ``sd``.

    The sample mean difference is independent of the two sample variances, so the power is
    the normal tail probability given the variances, averaged over their scaled chi-square
    laws (integrated on a quantile grid, accurate to about 0.1 point).
    """
    import numpy as np
    from scipy import stats

    q = (np.arange(_GRID) + 0.5) / _GRID
    ka, kb = n_a - 1, n_b - 1
    va = sd**2 * stats.chi2.ppf(q, ka)[:, None] / ka
    vb = sd**2 * stats.chi2.ppf(q, kb)[None, :] / kb
    qa, qb = va / n_a, vb / n_b
    se = np.sqrt(qa + qb)
    df = (qa + qb) ** 2 / (qa**2 / ka + qb**2 / kb)
    crit = stats.t.ppf(1 - alpha / 2, df) * se
    se_true = sd * np.sqrt(1 / n_a + 1 / n_b)
    power = stats.norm.sf((crit - delta) / se_true) + stats.norm.cdf((-crit - delta) / se_true)
    return float(power.mean())


def mde(sd: float, n_a: int, n_b: int, alpha: float = ALPHA, power: float = POWER) -> float:
    """Smallest true difference the Welch test detects with ``power`` at these group sizes."""
    from scipy.optimize import brentq

    if sd <= 0:
        return 0.0
    high = sd
    while welch_power(high, sd, n_a, n_b, alpha) < power:
        high *= 2
    return float(
        brentq(lambda d: welch_power(d, sd, n_a, n_b, alpha) - power, 0.0, high, xtol=sd * 1e-4)
    )


def seeds_needed(
    delta: float, sd: float, alpha: float = ALPHA, power: float = POWER, limit: int = 100_000
) -> int | None:
    """Seeds per group for ``power`` to detect ``delta`` given seed noise ``sd``; None if more
    than ``limit`` (the delta is negligible next to the noise) or undefined."""
    if sd <= 0 or delta == 0:
        return None
    delta = abs(delta)

    def enough(n: int) -> bool:
        return welch_power(delta, sd, n, n, alpha) >= power

    low, high = 2, 2
    while not enough(high):
        low, high = high, high * 2
        if high > limit:
            return None
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if enough(mid) else (mid, high)
    return low if enough(low) else high
