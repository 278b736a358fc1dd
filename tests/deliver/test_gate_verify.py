"""One Finding from VERIFY to DELIVER: the stdout of the real `rgt verify leakage|selection|
collapse --json`, saved as is into a delivery's findings/, is read by the disclosure gate and
disclosed next to the claims it touches."""

from __future__ import annotations

import json
import subprocess
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np
import pytest

from rgt.deliver.evidence import Claim, add_claim
from rgt.deliver.gate import gate
from rgt.deliver.runs import record_run
from rgt.deliver.workspace import Workspace
from tests import clirun
from tests.deliver.deliver_helpers import make_run


def _rgt(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return clirun.rgt(*args, cwd=cwd)


def _save(ws: Workspace, name: str, *args: str, cwd: Path) -> dict[str, Any]:
    """Run `rgt verify ARGS --json` and save its stdout into findings/ unchanged."""
    proc = _rgt("verify", *args, "--json", cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    (ws.findings / f"{name}.json").write_text(proc.stdout)
    doc: dict[str, Any] = json.loads(proc.stdout)
    schema = json.loads(resources.files("rgt").joinpath("schemas/finding.schema.json").read_text())
    jsonschema.validate(doc, schema)
    return doc


def _kinds(ws: Workspace) -> dict[str, list[tuple[str, str]]]:
    return {
        c.value.claim.id: sorted((f.kind, f.severity) for f in c.findings) for c in gate(ws).claims
    }


@pytest.mark.slow
def test_leakage_and_collapse_output_touch_every_claim(paper_ws: Workspace, tmp_path: Path) -> None:
    for split, names in (("train", ["a", "b"]), ("test", ["a", "c"])):
        (tmp_path / split).mkdir()
        for name in names:
            (tmp_path / split / f"{name}.png").write_bytes(f"pixels {name}".encode())
    np.save(tmp_path / "preds.npy", np.full((40, 4), 0.25))
    leak = _save(paper_ws, "leak", "leakage", "--train", "train", "--test", "test", cwd=tmp_path)
    assert leak["findings"][0]["source"] == "rgt verify leakage"
    _save(paper_ws, "collapse", "collapse", "preds.npy", cwd=tmp_path)
    expected = [("constant_output", "bug"), ("test_leakage", "bug")]
    assert _kinds(paper_ws) == {"acc": expected, "loss": expected}
    text = paper_ws.disclosure.read_text()
    assert "[test_leakage, bug] 1 of 2 distinct test samples also occur in train" in text
    strict = _rgt("deliver", "gate", "--strict", "--json", cwd=paper_ws.root)
    assert strict.returncode == 1 and json.loads(strict.stdout)["unresolved"] == 4


@pytest.mark.slow
def test_selection_output_touches_the_claims_of_its_runs(
    paper_ws: Workspace, tmp_path: Path
) -> None:
    other = make_run(tmp_path / "pulled" / "other", name="other", metrics={"f1": 0.5},
                     data={"train": "a" * 64, "val": "c" * 64, "test": "b" * 64})  # fmt: skip
    record_run(paper_ws, other)
    add_claim(paper_ws, Claim("f1", "other f1", "f1", run_glob="other-*", aggregate="value"))
    # relative paths, from another directory than the gate's: the run dirs the store recorded
    doc = _save(paper_ws, "sel", "selection", "pulled/s1", "pulled/other", cwd=tmp_path)
    assert [f["kind"] for f in doc["findings"]] == ["no_validation_split"]
    # what the demo saves: `rgt verify compare --json`, whole (its findings name no run)
    for seed in (0, 1):
        make_run(tmp_path / "new" / f"s{seed}", name="new", seed=seed,
                 metrics={"test_accuracy": 0.88 + seed / 1000})  # fmt: skip
    _save(paper_ws, "cmp", "compare", "pulled/s*", "new", "--metric", "test_accuracy",
          cwd=tmp_path)  # fmt: skip
    kinds = _kinds(paper_ws)
    note = ("no_config_change", "info")
    assert kinds["acc"] == kinds["loss"] == [note, ("no_validation_split", "warning")]
    assert kinds["f1"] == [note]  # its run has a validation split


def test_clean_output_adds_nothing_and_info_is_context(paper_ws: Workspace, tmp_path: Path) -> None:
    (tmp_path / "train").mkdir()
    (tmp_path / "test").mkdir()
    (tmp_path / "train" / "x").write_bytes(b"x")
    (tmp_path / "test" / "y").write_bytes(b"y")
    assert _save(paper_ws, "clean", "leakage", "--train", "train", "--test", "test",
                 cwd=tmp_path) == {"findings": []}  # fmt: skip
    note = {"probe": "percent_scale", "severity": "info", "message": "accuracy in percent"}
    (paper_ws.findings / "old.json").write_text(json.dumps(note))
    (paper_ws.root / "notes.md").write_text("an early draft said accuracy 85.1 %\n")  # 2.6 % off
    report = gate(paper_ws)
    assert [f.kind for f in report.claims[0].findings] == ["percent_scale", "possibly_stale"]
    assert not report.strict_failed  # info findings are context
    text = paper_ws.disclosure.read_text()
    assert "[percent_scale, info] accuracy in percent (context)" in text
    assert "[possibly_stale, info] notes.md:1 prints 85.1 %" in text
