"""`rgt demo` end to end: the README's first command must show exact resume after a kill -9."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest


@pytest.mark.slow
@pytest.mark.early  # the longest test of the suite (one whole demo; everything asserted on it)
def test_demo_json() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "rgt.cli", "demo", "--steps", "60", "--json"],
        capture_output=True,
        text=True,
        env=os.environ.copy(),
        timeout=900,
    )
    doc = json.loads(proc.stdout) if proc.stdout.strip() else {}
    assert proc.returncode == 0, why_not(doc, proc.stderr)
    assert doc["smoke"]["ok"] and doc["smoke"]["exact_resume"] is True
    assert doc["job"]["state"] == "succeeded" and doc["job"]["attempt"] == 2
    assert doc["job"]["label"] is None  # a succeeded job carries no failure label
    assert doc["job"]["interrupted_label"] == "preempted"  # the kill came from outside
    assert doc["kill"]["step_at_kill"] >= doc["kill"]["checkpoint_step"] >= 20
    assert 0 <= doc["steps_lost"] <= doc["kill"]["step_at_kill"]
    failing_before = {c["name"] for c in doc["gate_before_pull"]["checks"] if not c["ok"]}
    assert failing_before == {"pulled", "verified", "approved"}
    assert doc["pull"]["ok"] and doc["pull"]["files"] > 0
    failing_after = {c["name"] for c in doc["gate_after_pull"]["checks"] if not c["ok"]}
    assert failing_after == {"approved"}
    assert doc["exact_resume"] is True
    assert doc["final_digest"] == doc["reference_digest"] is not None
    assert set(doc["phases"]) >= {"smoke", "run + kill -9 + resume", "pull + verify"}
    # VERIFY: three seeds of two variants, a calibrated verdict with its numbers.
    compare = doc["compare"]
    assert compare["verdict"] in {"effect", "no_meaningful_effect", "inconclusive"}
    assert compare["n_a"] == compare["n_b"] == 3 and compare["mde"] is not None
    # DELIVER: every run recorded, a figure with provenance, a report rendered from the store.
    delivery = doc["delivery"]
    assert delivery["runs"] == 7 and delivery["citations"] == 3
    report = Path(delivery["report"]).read_text()
    assert "(95 % CI, n=3)" in report and compare["verdict"] in report
    provenance = Path(delivery["figure"]).with_name("loss.provenance.json")
    assert json.loads(provenance.read_text())["digest"] == delivery["figure_digest"]
    assert (Path(delivery["workspace"]) / "DISCLOSURE.md").is_file()


def why_not(doc: dict[str, Any], stderr: str) -> str:
    """What a failed demo printed that says why, and the tails of its job's logs."""
    keys = ("smoke", "job", "kill", "steps_lost", "exact_resume", "reference")
    said = {k: doc.get(k) for k in keys}
    said.update(final=doc.get("final_digest"), reference_digest=doc.get("reference_digest"))
    parts = [json.dumps(said, indent=1), stderr[-3000:]]
    jobs = Path(doc.get("workspace") or "/nonexistent") / "machine" / ".rgt" / "jobs"
    for log in sorted(jobs.glob("*/agent.log")) + sorted(jobs.glob("*/logs/*.log")):
        parts.append(f"--- {log.name}\n" + log.read_text(errors="replace")[-1500:])
    return "\n".join(parts)
