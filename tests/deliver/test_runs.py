"""The evidence store: content-derived ids, no-op re-record, read-only copies, tamper detection."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from rgt.deliver.runs import RECORD_NAME, check_store, record_run, stored_run_ids
from rgt.deliver.workspace import Workspace, init_workspace
from rgt.errors import SpecError
from tests.deliver.deliver_helpers import make_run


def test_demo_runs_are_recorded_once_each(demo_ws: Workspace, demo_runs: list[Path]) -> None:
    ids = stored_run_ids(demo_ws)
    assert len(ids) == 3 and all(i.startswith("train_demo-s") for i in ids)
    again = [record_run(demo_ws, run) for run in demo_runs]
    assert [r.created for r in again] == [False, False, False]
    assert sorted(r.run_id for r in again) == ids
    assert all(r.verified is True for r in again)  # results.json artifact hashes matched


def test_stored_run_is_read_only_and_carries_its_id(demo_ws: Workspace) -> None:
    run_id = stored_run_ids(demo_ws)[0]
    folder = demo_ws.run_dir(run_id)
    stored = json.loads((folder / "results.json").read_text())
    assert stored["run_id"] == run_id
    for path in [folder, *folder.rglob("*")]:
        assert not path.stat().st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH), path


def test_recording_the_stored_copy_gives_the_same_id(demo_ws: Workspace, tmp_path: Path) -> None:
    run_id = stored_run_ids(demo_ws)[0]
    other = init_workspace(tmp_path / "other")
    assert record_run(other, demo_ws.run_dir(run_id)).run_id == run_id


def test_different_content_makes_a_new_id_never_an_overwrite(tmp_path: Path) -> None:
    ws = init_workspace(tmp_path / "ws")
    first = record_run(ws, make_run(tmp_path / "a", metrics={"acc": 0.5}))
    second = record_run(ws, make_run(tmp_path / "b", metrics={"acc": 0.6}))
    assert first.run_id != second.run_id and second.created
    assert json.loads((first.path / "results.json").read_text())["metrics"]["acc"]["value"] == 0.5


@pytest.mark.parametrize("problem", ["modified", "added", "missing"])
def test_tamper_is_detected_with_file_and_run(demo_ws: Workspace, problem: str) -> None:
    run_id = stored_run_ids(demo_ws)[1]
    folder = demo_ws.run_dir(run_id)
    folder.chmod(0o755)
    if problem == "modified":
        target = folder / "metrics.jsonl"
        target.chmod(0o644)
        with target.open("a") as handle:
            handle.write('{"step": 21, "loss": 0.0}\n')
    elif problem == "added":
        (folder / "extra.txt").write_text("sneaked in")
    else:
        (folder / "model.safetensors").unlink()
    report = check_store(demo_ws)
    assert not report.ok and report.runs == 3
    file = {"modified": "metrics.jsonl", "added": "extra.txt", "missing": "model.safetensors"}
    assert [(t.run_id, t.file, t.problem) for t in report.tampered] == [
        (run_id, file[problem], problem)
    ]


def test_cli_check_exits_1_on_tamper(demo_ws: Workspace) -> None:
    rgt = [sys.executable, "-m", "rgt.cli", "deliver", "check", "--json"]
    clean = subprocess.run(rgt, cwd=demo_ws.root, capture_output=True, text=True)
    assert clean.returncode == 0 and json.loads(clean.stdout)["ok"] is True
    run_id = stored_run_ids(demo_ws)[0]
    (demo_ws.run_dir(run_id) / "results.json").chmod(0o644)
    with (demo_ws.run_dir(run_id) / "results.json").open("a") as handle:
        handle.write(" ")
    dirty = subprocess.run(rgt, cwd=demo_ws.root, capture_output=True, text=True)
    assert dirty.returncode == 1
    assert json.loads(dirty.stdout)["tampered"] == [
        {"run_id": run_id, "file": "results.json", "problem": "modified"}
    ]


def test_bad_results_are_refused_naming_the_field(tmp_path: Path) -> None:
    run = tmp_path / "bad"
    run.mkdir()
    (run / "results.json").write_text(json.dumps({"schema": "rgt.results/1", "name": "x",
                                                  "metrics": {"acc": "high"}}))  # fmt: skip
    ws = init_workspace(tmp_path / "ws")
    with pytest.raises(SpecError) as err:
        record_run(ws, run)
    assert "metrics.acc" in str(err.value)
    assert stored_run_ids(ws) == []


def test_artifact_hash_mismatch_records_unverified(tmp_path: Path) -> None:
    run = make_run(tmp_path / "r", metrics={"acc": 0.5})
    (run / "model.bin").write_bytes(b"changed after results.json was written")
    ws = init_workspace(tmp_path / "ws")
    result = record_run(ws, run)
    assert result.verified is False
    assert json.loads((result.path / RECORD_NAME).read_text())["verified"] is False


def test_hostile_paths(hostile_dir: Path) -> None:
    ws = init_workspace(hostile_dir / "workspace")
    result = record_run(ws, make_run(hostile_dir / "run dir", metrics={"acc": 0.7}))
    assert result.created and check_store(ws).ok
    assert (ws.root / "rgt.toml").is_file() and (ws.root / "EVIDENCE.json").is_file()
