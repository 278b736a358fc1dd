"""`rgt smoke` on scripts that were not written for rgt: it runs them in a temporary copy, kills
them at their first checkpoint (they ignore RGT_SMOKE), runs the resume form and says whether
the run continued from the checkpoint's step. The user's tree is never written."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

SCRIPTS = Path(__file__).parent / "scripts"
PY = sys.executable
pytestmark = pytest.mark.slow


def tree_state(root: Path) -> dict[str, tuple[str, int]]:
    """Every path under ``root`` with its content hash and mtime."""
    state = {}
    for path in sorted(root.rglob("*")):
        digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "dir"
        state[str(path.relative_to(root))] = (digest, path.stat().st_mtime_ns)
    return state


def smoke(project: Path, *args: str) -> tuple[int, dict[str, Any]]:
    before = tree_state(project)
    proc = subprocess.run(
        [PY, "-m", "rgt.cli", "smoke", "--json", *args],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "TMPDIR": str(project.parent)},
    )
    assert tree_state(project) == before, "smoke wrote into the user's working tree"
    assert proc.stdout, proc.stderr[-2000:]
    return proc.returncode, json.loads(proc.stdout)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "my project"
    root.mkdir()
    for script in SCRIPTS.glob("*.py"):
        shutil.copy(script, root / script.name)
    (root / "out").mkdir()
    (root / "out" / "ckpt.pt").write_bytes(b"an old local checkpoint, never to be resumed")
    return root


def test_nanogpt_style_continues_from_iter_num(project: Path) -> None:
    code, doc = smoke(project, "--ckpt", "out/ckpt.pt", "--resume-with", "--init_from=resume",
                      "--", PY, "train_nano.py")  # fmt: skip
    assert code == 0 and doc["ok"], doc["reason"]
    verdict = doc["resume"]
    assert verdict["checked"] and verdict["continued"] is True and doc["exact_resume"] is None
    assert verdict["step_source"] == "torch:iter_num" and verdict["ckpt"] == "out/ckpt.pt"
    assert verdict["resumed_step"] >= verdict["ckpt_step"] == 25
    assert doc["uninterrupted"]["stopped_by"] == "checkpoint"
    assert doc["resumed"]["stopped_by"] == "step_seen"


def test_a_resume_form_that_starts_over_fails_the_smoke(project: Path) -> None:
    code, doc = smoke(project, "--ckpt", "out/ckpt.pt", "--", PY, "train_nano.py")
    assert code == 1 and not doc["ok"]
    verdict = doc["resume"]
    assert verdict["continued"] is False and verdict["resumed_step"] == 0
    assert "started over" in doc["reason"] and "--resume-with" in doc["reason"]


def test_hf_example_style_continues_from_trainer_state(project: Path) -> None:
    code, doc = smoke(project, "--ckpt", "out/checkpoint-*", "--resume-with",
                      "--resume_from_checkpoint {ckpt}", "--", PY, "train_hf.py",
                      "--output_dir", "out")  # fmt: skip
    assert code == 0 and doc["ok"], doc["reason"]
    verdict = doc["resume"]
    assert verdict["continued"] is True and verdict["step_source"] == "trainer_state.json"
    saved = verdict["ckpt_step"]
    assert verdict["ckpt"] == f"out/checkpoint-{saved}" and verdict["resumed_step"] == saved >= 20
    assert verdict["command"][-2] == "--resume_from_checkpoint"
    assert verdict["command"][-1].endswith(f"/work/out/checkpoint-{saved}")  # the smoke copy


def test_a_script_that_saves_only_at_the_end_says_how_to_enable_the_check(
    project: Path,
) -> None:
    code, doc = smoke(project, "--ckpt", "out/model.pt", "--resume-with", "--init_from=resume",
                      "--kill-after-lines", "20", "--", PY, "train_end.py")  # fmt: skip
    assert code == 0 and doc["ok"]
    verdict = doc["resume"]
    assert verdict["checked"] is False and doc["uninterrupted"]["stopped_by"] == "lines"
    assert "no checkpoint appeared" in doc["reason"] and "out/model.pt" in doc["reason"]
    assert "--ckpt" in verdict["how_to_enable"]
