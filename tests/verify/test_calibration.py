"""Planted-null and planted-effect suites for the shipped decision rule (stats.verdicts).

Tolerances come from the binomial standard error of the simulated rate; the seed is fixed, so
the test is deterministic, but it would fail on a rule whose true rate were off by a few SE.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from rgt.verify.stats import mde, seeds_needed, verdicts, welch_power

SIMS = 20_000


def noise(rng: np.random.Generator, kind: str, shape: tuple[int, int]) -> Any:
    if kind == "normal":
        return rng.normal(size=shape)
    return rng.standard_t(3, size=shape) / math.sqrt(3)  # heavy tails, unit variance


@pytest.mark.parametrize("kind", ["normal", "t3"])
@pytest.mark.parametrize("n", [3, 5, 10])
@pytest.mark.slow
def test_false_effect_rate_under_the_null(n: int, kind: str) -> None:
    rng = np.random.default_rng(1000 + n)
    a, b = noise(rng, kind, (SIMS, n)), noise(rng, kind, (SIMS, n))
    rate = float(np.mean(verdicts(a, b) == "effect"))
    assert rate <= 0.055, f"false effect rate {rate:.4f} at n={n} ({kind})"


def test_null_with_unequal_seed_noise() -> None:
    rng = np.random.default_rng(7)
    a, b = rng.normal(size=(SIMS, 3)), 4 * rng.normal(size=(SIMS, 5))
    assert float(np.mean(verdicts(a, b) == "effect")) <= 0.055


@pytest.mark.parametrize("n", [3, 5, 10])
@pytest.mark.parametrize("size", [0.5, 1.0])
def test_power_on_planted_effects_matches_theory(n: int, size: float) -> None:
    """size is the planted delta in units of the MDE: 0.5 MDE and exactly the MDE (80 %)."""
    rng = np.random.default_rng(2000 + n)
    delta = size * mde(1.0, n, n)
    a, b = rng.normal(size=(SIMS, n)), rng.normal(size=(SIMS, n)) + delta
    observed = float(np.mean(verdicts(a, b) == "effect"))
    theory = welch_power(delta, 1.0, n, n)
    se = math.sqrt(theory * (1 - theory) / SIMS)
    assert abs(observed - theory) < max(4 * se, 0.01), (observed, theory)


@pytest.mark.slow  # > 1 s on two cores
def test_mde_is_the_80_percent_point() -> None:
    for n in (3, 5, 10):
        assert welch_power(mde(2.0, n, n), 2.0, n, n) == pytest.approx(0.80, abs=1e-3)
    assert mde(1.0, 3, 3) > mde(1.0, 10, 10)


def test_seeds_needed_reaches_80_percent_and_one_fewer_does_not() -> None:
    n = seeds_needed(0.5, 1.0)
    assert n is not None
    assert welch_power(0.5, 1.0, n, n) >= 0.80 > welch_power(0.5, 1.0, n - 1, n - 1)
    assert seeds_needed(0.0, 1.0) is None
    assert seeds_needed(1e-6, 1.0) is None  # beyond any plausible number of seeds


def test_equivalence_needs_a_tight_interval() -> None:
    rng = np.random.default_rng(3)
    a, b = rng.normal(size=(SIMS, 10)), rng.normal(size=(SIMS, 10))
    tight = float(np.mean(verdicts(a, b, sesoi=2.0) == "no_meaningful_effect"))
    loose = float(np.mean(verdicts(a[:, :3], b[:, :3], sesoi=0.2) == "no_meaningful_effect"))
    assert tight > 0.95  # a true null with a generous SESOI is nearly always declared
    # TOST at level alpha: when the true delta sits at the SESOI boundary it is declared <= 5 %
    edge = float(np.mean(verdicts(a, b + 1.0, sesoi=1.0) == "no_meaningful_effect"))
    assert edge <= 0.055 and loose <= 0.055


def test_naive_bootstrap_is_what_we_do_not_ship() -> None:
    """The reason for Welch: a 95 % percentile bootstrap at n=3 calls noise an effect often."""
    rng = np.random.default_rng(4)
    sims, n, boots = 2000, 3, 400
    a, b = rng.normal(size=(sims, n)), rng.normal(size=(sims, n))
    ia = rng.integers(0, n, size=(sims, boots, n))
    ib = rng.integers(0, n, size=(sims, boots, n))
    rows = np.arange(sims)[:, None, None]
    diffs = b[rows, ib].mean(-1) - a[rows, ia].mean(-1)
    lo, hi = np.percentile(diffs, [2.5, 97.5], axis=1)
    assert float(np.mean((lo > 0) | (hi < 0))) > 0.10
