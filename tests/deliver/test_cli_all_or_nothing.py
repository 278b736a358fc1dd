"""`deliver record` is all or nothing; `deliver reconcile` of a missing path is bad input."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path

import pytest

from rgt.deliver.workspace import init_workspace
from tests import clirun
from tests.deliver.deliver_helpers import make_run

_rgt = partial(clirun.rgt, "deliver")


@pytest.mark.slow
def test_record_validates_every_run_before_recording_any(tmp_path: Path) -> None:
    ws = init_workspace(tmp_path / "ws ü")
    good = [
        make_run(tmp_path / f"run {i}", seed=i, metrics={"acc": 0.5 + i / 10}) for i in (1, 2, 3)
    ]
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "results.json").write_text('{"schema": "rgt.results/1", "name": 5}')
    proc = _rgt("record", *map(str, good), str(bad), "--json", cwd=ws.root)
    assert proc.returncode == 2, proc.stdout
    assert "bad" in json.loads(proc.stdout)["message"]
    assert not ws.runs.exists() or not any(ws.runs.iterdir())  # nothing recorded
    again = _rgt("record", *map(str, good), "--json", cwd=ws.root)
    assert again.returncode == 0, again.stderr
    assert [r["created"] for r in json.loads(again.stdout)["runs"]] == [True, True, True]


def test_reconcile_of_a_missing_path_is_a_usage_error(tmp_path: Path) -> None:
    ws = init_workspace(tmp_path / "ws")
    missing = tmp_path / "no such dir"
    proc = _rgt("reconcile", str(missing), "--json", cwd=ws.root)
    assert proc.returncode == 2
    assert str(missing) in json.loads(proc.stdout)["message"]
    assert _rgt("reconcile", str(ws.root), "--json", cwd=ws.root).returncode == 0
