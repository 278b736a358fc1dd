"""`rgt verify tracker` as a real subprocess: --json document, human lines, light imports."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rgt.results import write_results
from tests.clirun import rgt


@pytest.mark.slow
def test_json_document(corpus: Path) -> None:
    result = rgt("verify", "tracker", str(corpus), "--json", "--stale-after", "0")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["runs"] == 22 == len(data["tracked_runs"])
    assert {k: v["runs"] for k, v in data["sources"].items()} == {
        "mlflow": 7, "tensorboard": 5, "wandb": 6, "trackio": 4,
    }  # fmt: skip
    probes = {f["kind"] for f in data["findings"]}
    assert probes == {"duplicate_run", "name_config_mismatch", "truncated_history", "nan_at_end",
                      "failed_run", "stale_running", "summary_mismatch"}  # fmt: skip
    diverged = [
        r for r in data["tracked_runs"] if r["name"] == "diverged" and r["source"] == "mlflow"
    ]
    assert diverged[0]["summary"]["loss"] == "nan"  # JSON has no NaN; the text says it


def test_human_output_and_results_option(corpus: Path, tmp_path: Path) -> None:
    write_results(tmp_path, {"name": "lr3e-4", "metrics": {"loss": 0.9}})
    result = rgt("verify", "tracker", str(corpus / "trackio"), "--results", str(tmp_path))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "4 run(s) read: 4 trackio"
    assert any("results.json says loss = 0.9" in line for line in lines)
    assert any(line.startswith("warning") and "share one config" in line for line in lines)


def test_empty_folder_and_missing_path(tmp_path: Path) -> None:
    empty = rgt("verify", "tracker", str(tmp_path), "--json")
    assert json.loads(empty.stdout) == {"runs": 0, "sources": {}, "findings": [],
                                        "tracked_runs": []}  # fmt: skip
    assert rgt("verify", "tracker", str(tmp_path / "nope")).returncode == 2


def test_cli_and_package_import_no_tracker_sdk() -> None:
    code = (
        "import sys, rgt.cli, rgt.verify.tracker, rgt.verify.tracker.scan\n"
        "heavy = {'mlflow', 'wandb', 'tensorboard', 'trackio', 'torch', 'numpy'}\n"
        "print(sorted(heavy & {m.split('.')[0] for m in sys.modules}))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stdout.strip() == "[]", result.stderr
