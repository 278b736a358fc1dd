"""`rgt verify artifacts` run as a real subprocess: lines, summary, --json, exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.clirun import rgt
from tests.verify.test_artifacts import manifest_for, write_good_tree


@pytest.mark.slow
def test_all_ok_prints_one_line_per_file_and_summary(hostile_dir: Path) -> None:
    write_good_tree(hostile_dir)
    (hostile_dir / "manifest.json").write_text(json.dumps(manifest_for(hostile_dir)))
    result = rgt("verify", "artifacts", str(hostile_dir))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 10 and all(line.startswith("OK") for line in lines[:-1])
    assert lines[-1].startswith("100 % OK: 9 files")


@pytest.mark.slow
def test_failure_exits_1_and_json_is_one_document(tmp_path: Path) -> None:
    write_good_tree(tmp_path)
    manifest = manifest_for(tmp_path)
    (tmp_path / "metrics.json").write_text('{"psnr": ')
    manifest_path = tmp_path.parent / "elsewhere.json"
    manifest_path.write_text(json.dumps(manifest))
    result = rgt("verify", "artifacts", str(tmp_path), "--manifest", str(manifest_path), "--json")
    assert result.returncode == 1
    data = json.loads(result.stdout)
    failed = [f["path"] for f in data["files"] if not f["ok"]]
    assert (data["ok"], failed) == (False, ["metrics.json"])
    human = rgt("verify", "artifacts", str(tmp_path), "--manifest", str(manifest_path))
    assert "FAILED: 1 of 9 files bad (8 ok, 0 hash_only, 1 bad)" in human.stdout
    assert {f["verdict"] for f in data["files"]} == {"ok", "bad"}
    assert data["summary"]["bad"] == 1 and data["units"] == []


def test_bad_manifest_is_a_usage_level_error_naming_the_field(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text('{"a": 1}')
    (tmp_path / "manifest.json").write_text(json.dumps({"schema": "rgt.manifest/1", "files": [{}]}))
    result = rgt("verify", "artifacts", str(tmp_path))
    assert result.returncode == 1
    assert "files[0].path" in result.stderr and "fix:" in result.stderr


@pytest.mark.slow
def test_an_incomplete_checkpoint_folder_is_named_not_called_zero_files_bad(
    tmp_path: Path,
) -> None:
    # A transformers Trainer checkpoint whose weights were never written: every file in it is
    # sound JSON, the folder is not a checkpoint anyone can resume from.
    folder = tmp_path / "checkpoint-500"
    folder.mkdir()
    (folder / "trainer_state.json").write_text(json.dumps({"global_step": 500}))
    (folder / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    result = rgt("verify", "artifacts", str(tmp_path))
    assert result.returncode == 1, result.stdout
    summary = result.stdout.strip().splitlines()[-1]
    assert summary.startswith("FAILED: 1 checkpoint folder(s) bad, 0 of 2 files bad"), summary
    assert "incomplete" in result.stdout
