"""`rgt lint` on real public training scripts: every finding judged, precision held.

The numbers themselves are in BENCHMARKS.md (``python tests/lint/measure.py``).
"""

from __future__ import annotations

import pytest

from rgt.lint import RULES
from tests.lint.measure import measure


@pytest.mark.parametrize("half", ["dev", "heldout"])
def test_every_finding_is_judged_and_precision_holds(half: str) -> None:
    tally = measure(half)
    assert tally.unjudged == [], "label these findings in tests/lint/corpus/labels.json"
    _tp, _fp, _fn, precision, _recall = tally.score(set(RULES))
    assert precision >= 0.9
    bugs = {c for c, r in RULES.items() if r.severity.value == "bug"}
    assert tally.score(bugs)[1] == 0  # no false `bug` (the only severity that fails a run)
