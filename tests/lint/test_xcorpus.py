"""`rgt lint` on real bugs that span files: the frozen halves stay frozen, the tune half holds.

The numbers are in BENCHMARKS.md ("Lint across files"; ``python tests/lint/xmeasure.py``). Only
the tune half is held to a floor here: a test that the test half must pass would make it one
more set to tune on.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.lint.xmeasure import BATCHES, SPLITS, frozen_digest, measure

FROZEN = Path(__file__).parent / "xcorpus" / "FROZEN.md"


def test_the_test_half_and_the_blind_batches_are_as_frozen() -> None:
    recorded = re.findall(r"^    ([0-9a-f]{64})$", FROZEN.read_text(), re.M)
    # Batches written at the same time may be frozen in either order: compare as multisets.
    expected = [frozen_digest("test"), *(frozen_digest(name) for name in BATCHES)]
    expected.append(frozen_digest(SPLITS[1]))  # the late batches' test half
    assert sorted(recorded) == sorted(expected)


@pytest.mark.slow
def test_the_tune_half_finds_its_bugs_without_a_false_finding() -> None:
    tally = measure("tune")
    assert tally.false == []
    assert tally.found["all"] >= 22 and tally.found["cross=True"] >= 6
