"""The disclosure gate: planted VERIFY findings, stale copies and unverified runs are disclosed
next to the claims they touch; only --strict turns them into exit 1."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import scipy.stats

from rgt.deliver.evidence import Claim, add_claim
from rgt.deliver.gate import gate
from rgt.deliver.runs import record_run
from rgt.deliver.workspace import Workspace
from tests.deliver.deliver_helpers import make_run


def _cli(ws: Workspace, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rgt.cli", "deliver", "gate", *args],
        cwd=ws.root, capture_output=True, text=True,
    )  # fmt: skip


def test_clean_claims_disclose_n_ci_and_data(paper_ws: Workspace) -> None:
    report = gate(paper_ws)
    assert not report.strict_failed
    acc = report.claims[0].to_json()
    assert acc["n"] == 3 and acc["printed"] == "87.34%" and acc["findings"] == []
    assert acc["data"] == {"test": ["b" * 64], "train": ["a" * 64]}
    text = paper_ws.disclosure.read_text()
    low, high = scipy.stats.t.interval(
        0.95, 2, loc=0.8734, scale=scipy.stats.sem([0.8712, 0.8734, 0.8756])
    )
    assert "## acc: our accuracy" in text
    assert f"n=3 runs; 95 % CI {100 * low:.2f}% to {100 * high:.2f}%" in text
    assert _cli(paper_ws, "--strict").returncode == 0


@pytest.mark.slow
def test_planted_findings_are_disclosed(paper_ws: Workspace, tmp_path: Path) -> None:
    findings = {
        "findings": [
            {"kind": "leakage", "message": "12 test images also in train", "runs": ["base-s1-*"],
             "source": "rgt verify leakage"},
            {"kind": "test_selection", "message": "checkpoint picked on test", "runs": ["*"],
             "resolved": True, "resolution": "re-selected on val"},
            {"kind": "collapse", "message": "constant outputs", "runs": ["other-*"]},
        ]
    }  # fmt: skip
    (paper_ws.findings / "verify.json").write_text(json.dumps(findings))
    record_run(paper_ws, make_run(tmp_path / "smoke", name="smoke", metrics={"f1": 0.5},
                                  smoke=True, with_artifact=False))  # fmt: skip
    add_claim(paper_ws, Claim("f1", "smoke f1", "f1", run_glob="smoke-*", aggregate="value"))
    (paper_ws.root / "notes.md").write_text("our loss was 0.415 in the draft\n")
    report = {c.value.claim.id: c for c in gate(paper_ws).claims}
    kinds = {cid: sorted(f.kind for f in c.findings) for cid, c in report.items()}
    assert kinds == {
        "acc": ["leakage", "test_selection"],
        "loss": ["leakage", "stale", "test_selection"],
        "f1": ["not_verified", "smoke_run", "test_selection"],
    }
    text = paper_ws.disclosure.read_text()
    assert "[leakage, warning] 12 test images also in train (UNRESOLVED)" in text
    assert "(resolved: re-selected on val)" in text
    assert "notes.md:1 prints 0.415" in text
    assert "constant outputs" not in text  # it touches no claimed run
    assert _cli(paper_ws).returncode == 0  # never blocks
    strict = _cli(paper_ws, "--strict", "--json")
    assert strict.returncode == 1 and json.loads(strict.stdout)["strict_failed"] is True


def test_malformed_finding_names_the_file(paper_ws: Workspace) -> None:
    (paper_ws.findings / "bad.json").write_text(json.dumps({"message": "no kind"}))
    proc = _cli(paper_ws)
    assert proc.returncode == 2 and "bad.json" in proc.stderr and "kind" in proc.stderr
