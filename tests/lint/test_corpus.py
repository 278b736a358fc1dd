"""`rgt lint` on real public training scripts: every finding judged, precision held.

The numbers themselves are in BENCHMARKS.md (``python tests/lint/measure.py``).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from rgt.lint import RULES, _run, lint_paths
from tests.lint.measure import CORPUS, measure


@pytest.mark.parametrize("half", ["dev", "heldout"])
def test_every_finding_is_judged_and_precision_holds(half: str) -> None:
    tally = measure(half)
    assert tally.unjudged == [], "label these findings in tests/lint/corpus/labels.json"
    _tp, _fp, _fn, precision, _recall = tally.score(set(RULES))
    assert precision >= 0.9
    bugs = {c for c, r in RULES.items() if r.severity.value == "bug"}
    assert tally.score(bugs)[1] == 0  # no false `bug` (the only severity that fails a run)


def test_many_files_in_worker_processes_find_what_one_process_finds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scripts = sorted((CORPUS / "dev").glob("*.py.txt"))[:20]
    for script in scripts:
        shutil.copyfile(script, tmp_path / script.name.removesuffix(".txt"))
    parallel = lint_paths([str(tmp_path)])
    monkeypatch.setattr(_run, "PARALLEL_FROM", 10**6)
    serial = lint_paths([str(tmp_path)])
    assert parallel.findings == serial.findings and len(parallel.findings) > 20
