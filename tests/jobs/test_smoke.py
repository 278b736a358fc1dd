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
    cwd: Path, *command: str, env: dict[str, str] | None = None, flags: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rgt.cli", "smoke", "--json", *flags, "--", *command],
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


@pytest.mark.slow  # > 1 s on two cores
def test_exact_resume_passes(project: Path) -> None:
    proc = smoke(project, sys.executable, "train.py")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["ok"] and doc["exact_resume"] is True
    assert doc["killed"]["returncode"] == -9 and doc["killed"]["step"] == 1
    assert doc["resumed"]["step"] == doc["uninterrupted"]["step"] == 2


@pytest.mark.slow  # > 1 s on two cores
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


# A stdlib script with its own resume flag that ignores RGT_SMOKE: it saves out/state.json every
# 5 steps (relative to its working directory) and loads it only with --resume.
OWN_FLAG = """
import json, os, sys, time
step = json.load(open("out/state.json"))["step"] if "--resume" in sys.argv else 0
os.makedirs("out", exist_ok=True)
while step < 400:
    step += 1
    print(f"step {step}: loss {1 / step:.4f}", flush=True)
    if step % 5 == 0:
        json.dump({"step": step}, open("out/state.json", "w"))
    time.sleep(0.01)
"""


def tree(root: Path) -> dict[str, tuple[bytes, int]]:
    return {
        str(p.relative_to(root)): (p.read_bytes() if p.is_file() else b"", p.stat().st_mtime_ns)
        for p in sorted(root.rglob("*"))
    }


def test_a_script_with_its_own_resume_flag_continues_and_the_tree_is_untouched(
    project: Path,
) -> None:
    (project / "own.py").write_text(OWN_FLAG)
    before = tree(project)
    flags = ("--ckpt", "out/state.json", "--resume-with", "--resume")
    proc = smoke(project, sys.executable, "own.py", flags=flags)
    assert tree(project) == before  # no out/, no __pycache__: it ran in a temporary copy
    doc = json.loads(proc.stdout)
    assert proc.returncode == 0 and doc["ok"], doc["reason"]
    verdict = doc["resume"]
    assert verdict["continued"] and verdict["step_source"] == "json:step"
    assert verdict["resumed_step"] == verdict["ckpt_step"] + 1 and verdict["ckpt_step"] % 5 == 0
    assert doc["uninterrupted"]["stopped_by"] == "checkpoint"


def test_without_the_resume_flag_the_restart_from_zero_is_caught(project: Path) -> None:
    (project / "own.py").write_text(OWN_FLAG)
    proc = smoke(project, sys.executable, "own.py", flags=("--ckpt", "out/state.json"))
    doc = json.loads(proc.stdout)
    assert proc.returncode == 1 and doc["resume"]["continued"] is False
    assert doc["resume"]["resumed_step"] == 1 and "started over" in doc["reason"]


def test_a_file_left_out_by_gitignore_is_named(project: Path) -> None:
    (project / ".gitignore").write_text("*.bin\n")
    (project / "train.bin").write_bytes(b"data")
    (project / "reader.py").write_text("open('train.bin').read()\n")
    doc = json.loads(smoke(project, sys.executable, "reader.py").stdout)
    assert (
        not doc["ok"]
        and "train.bin is in your tree but not in what `rgt run` ships" in doc["reason"]
    )
