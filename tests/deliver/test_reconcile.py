"""Reconcile on a paper repository with planted drifts and distractor numbers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rgt.deliver.evidence import load_claims
from rgt.deliver.numbers import Found, is_copy
from rgt.deliver.reconcile import reconcile
from rgt.deliver.workspace import Workspace

README = """\
# Our method

We reach 87.34 % test accuracy with a loss of 0.412.
The dataset is 87.1 MB and training took 87.5 hours on 8 GPUs (test accuracy is the metric).
Random chance accuracy is 10 %, and we improve accuracy by 2.1 points over the baseline.
Table 1 reports accuracy; see version 0.87.1 of the accuracy scripts, which cost $0.86.
Old draft: accuracy 87.1 %.
"""

PAPER_TEX = r"""\section{Results}
Our model attains an accuracy of 87.3\% (Table~\ref{tab:main}).
% stale comment: accuracy 86.9\%
The final test loss is 0.418 after 40 epochs.
"""

CODE = """\
def evaluate():
    # reported accuracy: 0.873
    threshold = 0.86  # not a claim: no metric name on this line
    return "accuracy 0.99"  # a string, not a comment: the comment part is this one
"""


def _notebook() -> str:
    cells = [
        {"cell_type": "code", "source": ["accuracy = 0.85  # code cell, ignored\n"]},
        {"cell_type": "markdown", "source": ["## Results\n", "Accuracy was .873 on test.\n"]},
        {"cell_type": "markdown", "source": ["The test accuracy reached 88.2%.\n"]},
    ]
    return json.dumps({"cells": cells, "nbformat": 4}, indent=1)


@pytest.fixture
def repo(paper_ws: Workspace) -> Path:
    root = paper_ws.root.parent
    (root / "README.md").write_text(README)
    (root / "paper").mkdir()
    (root / "paper" / "main.tex").write_text(PAPER_TEX)
    (root / "src").mkdir()
    (root / "src" / "eval.py").write_text(CODE)
    (root / "notes.ipynb").write_text(_notebook())
    (root / "node_modules").mkdir()
    (root / "node_modules" / "x.md").write_text("accuracy 80.0 %\n")  # never scanned
    return root


def test_drifts_ok_and_distractors(repo: Path, paper_ws: Workspace) -> None:
    report = reconcile(repo, paper_ws)
    drifts = {(h.file, h.line, h.found) for h in report.drifts}
    assert drifts == {
        ("README.md", 7, "87.1 %"),
        ("paper/main.tex", 3, r"86.9\%"),
        ("paper/main.tex", 4, "0.418"),
        ("notes.ipynb", 19, "88.2%"),
    }
    ok = {(h.claim, h.file, h.line) for h in report.ok}
    assert ok == {
        ("acc", "README.md", 3),
        ("loss", "README.md", 3),
        ("acc", "paper/main.tex", 2),
        ("acc", "src/eval.py", 2),
        ("acc", "notes.ipynb", 13),
    }
    assert report.missing == []
    assert {h.claim for h in report.drifts if h.found == "0.418"} == {"loss"}


def test_missing_claim_and_appears_in_update(repo: Path, paper_ws: Workspace) -> None:
    (repo / "paper" / "main.tex").write_text("nothing here\n")
    (repo / "README.md").write_text("accuracy 87.34 %\n")
    report = reconcile(repo, paper_ws, update=True)
    assert report.missing == ["loss"]
    claims = {c.id: c for c in load_claims(paper_ws)}
    assert "README.md:1" in claims["acc"].appears_in and claims["loss"].appears_in == ()


def test_cli_json_shape_and_exit_code(repo: Path, paper_ws: Workspace) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "rgt.cli", "deliver", "reconcile", str(repo), "--json"],
        cwd=paper_ws.root, capture_output=True, text=True,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    data = json.loads(proc.stdout)
    assert {"drifts", "missing", "ok"} <= set(data)
    assert set(data["drifts"][0]) == {"claim", "file", "line", "found", "expected"}


@pytest.mark.parametrize(
    ("printed", "percent", "copy"),
    [
        ("0.8734", False, True), (".873", False, True), ("87.34", False, True),
        ("87.3", True, True), ("87", True, True), ("0.87", False, True),
        ("87.4", True, False), ("0.874", False, False), ("0.8735", False, False),
    ],
)  # fmt: skip
def test_printed_forms(printed: str, percent: bool, copy: bool) -> None:
    assert is_copy(0.8734, Found(printed, percent)) is copy
