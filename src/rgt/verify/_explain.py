"""Plain-language explanation of a comparison: the verdict and the numbers behind it."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rgt.verify.compare import Comparison


def _g(x: float) -> str:
    return f"{x:.4g}"


def _numbers(c: Comparison) -> str:
    level = round(100 * (1 - c.alpha))
    return (
        f"delta B - A = {_g(c.delta)} ({level} % CI {_g(c.ci[0])} to {_g(c.ci[1])}, "
        f"Welch p = {c.p_value:.3g}, n = {c.n_a} vs {c.n_b} seeds)"
    )


def _power(c: Comparison) -> str:
    text = f"minimum detectable effect (80 % power) at these seeds: {_g(c.mde)}"
    if c.seeds_needed is not None:
        text += f"; the observed delta needs about {c.seeds_needed} seeds per group to detect"
    return text


def explain(c: Comparison) -> str:
    if c.verdict == "suspect_bug":
        bugs = [f.message for f in c.findings if f.severity == "bug"]
        listing = "; ".join(bugs) if bugs else "the seed statistics are degenerate"
        return f"Suspect a bug, not an effect: {listing}. Fix it before reading {_numbers(c)}."
    if c.verdict == "unknown_direction":
        return (
            f"No verdict: the direction of {c.metric!r} is unknown (pass --direction max|min "
            f"or record it in results.json). {_numbers(c)}; {_power(c)}."
        )
    if c.verdict == "effect":
        better = (c.delta > 0) == (c.direction == "max")
        word = "better" if better else "worse"
        return f"Effect: B is {word} than A on {c.metric}; {_numbers(c)}; {_power(c)}."
    if c.verdict == "no_meaningful_effect":
        return (
            f"No meaningful effect: the difference lies within ±{_g(c.sesoi or 0)} "
            f"(equivalence test passed); {_numbers(c)}."
        )
    hint = "" if c.sesoi is not None else " Pass --sesoi to test for no meaningful effect."
    return (
        f"Inconclusive: the CI includes 0 and the data cannot rule out a meaningful "
        f"difference; {_numbers(c)}; {_power(c)}.{hint}"
    )
