"""The newest complete checkpoint, judged from outside the script (real files, no mocks)."""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path

import pytest

from rgt.agent import _ckpt_find
from rgt.errors import SpecError, UsageError
from rgt.jobs.resume_form import for_cell, resume_spec
from rgt.sweep._file import load_sweep


def touch(path: Path, data: bytes = b"x", mtime: float | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    if mtime is not None:
        os.utime(path, (mtime, mtime))
    return path


def newest(pattern: str | None, work: Path, ckpt_dir: Path, since: float | None = None) -> str:
    found = _ckpt_find.newest(pattern, [("work", str(work)), ("ckpt_dir", str(ckpt_dir))], since)
    return str(found.path)


def test_the_newest_complete_file_wins(tmp_path: Path) -> None:
    work, ckpt = tmp_path / "work", tmp_path / "ckpt"
    touch(work / "out" / "a.pt", mtime=100)
    touch(work / "out" / "b.pt", mtime=200)
    touch(work / "out" / "c.pt", b"", mtime=300)  # empty
    touch(work / "out" / ".tmp-d.pt", mtime=400)  # in flight
    touch(work / "out" / "e.pt.part", mtime=500)
    assert newest("out/*", work, ckpt).endswith("out/b.pt")


def test_a_torn_torch_zip_is_not_a_checkpoint(tmp_path: Path) -> None:
    whole = tmp_path / "whole.pt"
    with zipfile.ZipFile(whole, "w") as archive:
        archive.writestr("archive/data.pkl", b"0" * 4096)
    torn = tmp_path / "torn.pt"
    torn.write_bytes(whole.read_bytes()[:-30])
    assert _ckpt_find.incomplete(str(whole)) is None
    assert "cut short" in str(_ckpt_find.incomplete(str(torn)))


def test_hf_folders_need_trainer_state_and_sort_by_number(tmp_path: Path) -> None:
    out = tmp_path / "work" / "out"
    for step in (9, 10):
        touch(out / f"checkpoint-{step}" / "model.bin", mtime=100)
        touch(out / f"checkpoint-{step}" / "trainer_state.json", b"{}", mtime=100)
    touch(out / "checkpoint-11" / "model.bin", mtime=200)  # cut before trainer_state.json
    found = _ckpt_find.newest("out/checkpoint-*", [("work", str(tmp_path / "work"))], None)
    assert str(found.path).endswith("checkpoint-10")
    assert any("trainer_state.json" in s for s in found.skipped)


def test_files_older_than_the_job_do_not_count_but_seeded_ones_do(tmp_path: Path) -> None:
    work, ckpt = tmp_path / "work", tmp_path / "ckpt"
    touch(work / "ckpt.pt", mtime=100)
    assert newest("ckpt.pt", work, ckpt, since=1000) == "None"
    touch(ckpt / "ckpt.pt", mtime=100)  # RGT_CKPT_DIR: seeded from an earlier job
    assert newest("ckpt.pt", work, ckpt, since=1000) == str(ckpt / "ckpt.pt")


def test_rgt_ckpt_dir_uses_the_newest_commit_record(tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpt"
    touch(ckpt / "ckpt-000000000001-aa.rgt", mtime=100)
    touch(ckpt / "ckpt-000000000002-bb.rgt", mtime=300)  # no record: a cut-short save
    record = {"step": 1, "file": "ckpt-000000000001-aa.rgt"}
    touch(ckpt / "ckpt-000000000001.json", json.dumps(record).encode(), mtime=200)
    assert newest(None, tmp_path / "work", ckpt).endswith("ckpt-000000000001-aa.rgt")


def test_resume_spec_and_sweep_cells() -> None:
    assert resume_spec(None, None) is None
    spec = resume_spec("--resume_from_checkpoint {ckpt} --lr {lr}", "out/checkpoint-*")
    assert spec == {"with": "--resume_from_checkpoint {ckpt} --lr {lr}", "ckpt": "out/checkpoint-*"}
    cell = for_cell(spec, {"lr": 0.1, "seed": 0})
    assert cell == {"with": "--resume_from_checkpoint {ckpt} --lr 0.1", "ckpt": "out/checkpoint-*"}


def test_bad_resume_input_names_the_flag() -> None:
    with pytest.raises(UsageError, match="cannot be split"):
        resume_spec("--resume_from 'unclosed", None)
    with pytest.raises(UsageError, match="empty"):
        resume_spec("  ", None)


def test_sweep_file_keys(tmp_path: Path) -> None:
    head = 'name = "x"\ncommand = ["python3", "t.py"]\nmachines = ["m"]\n'
    good = tmp_path / "good.toml"
    good.write_text(head + 'resume_with = "--init_from=resume"\nckpt = "out/ckpt.pt"\n')
    assert load_sweep(good).resume == {"with": "--init_from=resume", "ckpt": "out/ckpt.pt"}
    bad = tmp_path / "bad.toml"
    bad.write_text(head + "ckpt = 3\n")
    with pytest.raises(SpecError) as info:
        load_sweep(bad)
    assert info.value.field == "ckpt"
