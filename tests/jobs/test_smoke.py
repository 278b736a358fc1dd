"""`rgt smoke`: a broken command fails fast; a resume that loses state is caught."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

# A tiny "training" loop on rgt.ckpt with plain Python state. With FORGET set it does not
# restore its random generator on resume: the classic bug that makes a resumed run diverge.
SCRIPT = """
import os, random, sys
from rgt.ckpt import Checkpointer
ckpt = Checkpointer.from_env(every_steps=1)
state = ckpt.load_latest()
rng = random.Random(0)
step, weight = 0, 0.0
if state is not None:
    step, weight = state["step"], state["weight"]
    if not os.environ.get("FORGET"):
        rng.setstate(tuple(state["rng"][:1]) + (tuple(state["rng"][1]),) + (state["rng"][2],))
while step < 2:
    step += 1
    weight += rng.random()
    print(f"step {step} loss {weight}", flush=True)
    if ckpt.due(step):
        s = rng.getstate()
        ckpt.save({"step": step, "weight": weight, "rng": [s[0], list(s[1]), s[2]]}, step=step)
"""


def smoke(
    cwd: Path, *command: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rgt.cli", "smoke", "--json", "--", *command],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **(env or {})},
    )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "train.py").write_text(SCRIPT)
    return tmp_path


def test_exact_resume_passes(project: Path) -> None:
    proc = smoke(project, sys.executable, "train.py")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["ok"] and doc["exact_resume"] is True
    assert doc["killed"]["returncode"] == -9 and doc["killed"]["step"] == 1
    assert doc["resumed"]["step"] == doc["uninterrupted"]["step"] == 2


def test_a_resume_that_forgets_state_is_caught(project: Path) -> None:
    proc = smoke(project, sys.executable, "train.py", env={"FORGET": "1"})
    assert proc.returncode == 1
    doc = json.loads(proc.stdout)
    assert doc["exact_resume"] is False and "not restored" in doc["reason"]


def test_a_broken_command_fails_with_its_label(project: Path) -> None:
    (project / "bad.py").write_text("import definitely_not_installed_xyz\n")
    proc = smoke(project, sys.executable, "bad.py")
    assert proc.returncode == 1
    doc = json.loads(proc.stdout)
    assert not doc["ok"] and "import_error" in doc["reason"]


def test_a_script_without_checkpoints_cannot_prove_resume(project: Path) -> None:
    (project / "plain.py").write_text("print('step 1 loss 0.5')\n")
    doc = json.loads(smoke(project, sys.executable, "plain.py").stdout)
    assert doc["ok"] and doc["exact_resume"] is None and "no checkpoint" in doc["reason"]


def test_a_missing_program_is_an_error(project: Path) -> None:
    proc = smoke(project, "no-such-program-xyz")
    assert proc.returncode == 1
    assert "cannot start" in json.loads(proc.stdout)["message"]
