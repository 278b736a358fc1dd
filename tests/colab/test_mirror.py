"""The verified flush to a lagging durable folder (rgt.ckpt.mirror), with real processes: a
training process killed by SIGKILL in the middle of a copy, a separate late writer that makes the
copy's bytes visible only after a delay, and a fresh process that resumes from the folder."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from rgt.ckpt import Checkpointer, CheckpointFallbackWarning, state_digest
from rgt.ckpt.mirror import POINTER
from tests.colab.mirror_child import state

HERE = Path(__file__).parent
CHILD = str(HERE / "mirror_child.py")
LATE = str(HERE / "late_writer.py")


def _child(tmp: Path, first: int, last: int, *mode: str, **env: str) -> subprocess.Popen[str]:
    args = [sys.executable, CHILD, str(tmp / "local"), str(tmp / "drive"), str(first), str(last)]
    environment = {**os.environ, "RGT_JOB_DIR": str(tmp), "RGT_JOB_ID": "j1", **env}
    return subprocess.Popen([*args, *mode], env=environment, text=True)


def _wait_for(path: Path, proc: subprocess.Popen[str], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert proc.poll() is None, f"the child exited ({proc.returncode}) before {path.name}"
        assert time.monotonic() < deadline, f"no {path.name} after {timeout} s"
        time.sleep(0.01)


def _events(tmp: Path, kind: str) -> list[dict[str, Any]]:
    lines = (tmp / "events.jsonl").read_text().splitlines()
    return [e for e in map(json.loads, lines) if e["kind"] == kind]


def _resume_in_fresh_process(tmp: Path) -> dict[str, Any]:
    """A new session: an empty local disk, the mirror configured by RGT_CKPT_MIRROR."""
    code = (
        "import json, sys; from rgt.ckpt import Checkpointer, state_digest\n"
        "c = Checkpointer.from_env(default_dir=sys.argv[1])\n"
        "s = c.load_latest()\n"
        "print(json.dumps({'step': s['step'], 'digest': state_digest(s), 'from': c.loaded.path}))"
    )
    env = {**os.environ, "RGT_CKPT_MIRROR": str(tmp / "drive")}
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp / "new-session-local")],
        env=env,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    doc: dict[str, Any] = json.loads(out.stdout)
    return doc


def _pointer(tmp: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((tmp / "drive" / POINTER).read_text())
    return doc


def _save_here(tmp: Path, step: int) -> None:
    """An earlier save, made in this process (what is under test runs in the child)."""
    Checkpointer(tmp / "local", mirror=tmp / "drive", keep_last=3).save(state(step), step)


def test_a_copy_killed_midway_never_becomes_latest(tmp_path: Path) -> None:
    _save_here(tmp_path, 1)
    proc = _child(tmp_path, 2, 2, "kill-mid-copy", str(tmp_path))
    _wait_for(tmp_path / "mid-copy", proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    drive = tmp_path / "drive"
    (partial,) = [p for p in drive.iterdir() if p.name.startswith(".tmp-")]
    assert 0 < partial.stat().st_size < len(state(2)["weights"])  # really cut mid-way
    assert not (drive / "ckpt-000000000002.json").exists()
    assert _pointer(tmp_path)["step"] == 1
    # The local checkpoint of step 2 was committed; the new session sees only the mirror.
    resumed = _resume_in_fresh_process(tmp_path)
    assert resumed["step"] == 1 and resumed["digest"] == state_digest(state(1))
    assert Path(resumed["from"]).parent == drive


def test_the_next_flush_cleans_a_killed_copy_and_commits(tmp_path: Path) -> None:
    proc = _child(tmp_path, 1, 1, "kill-mid-copy", str(tmp_path))
    _wait_for(tmp_path / "mid-copy", proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    assert not (tmp_path / "drive" / POINTER).exists()  # nothing verified yet: no latest
    assert _child(tmp_path, 2, 3).wait(timeout=60) == 0
    names = sorted(p.name for p in (tmp_path / "drive").iterdir())
    assert not [n for n in names if n.startswith(".tmp-")]
    assert [n for n in names if n.endswith(".json") and n != POINTER] == [
        "ckpt-000000000002.json",
        "ckpt-000000000003.json",
    ]
    resumed = _resume_in_fresh_process(tmp_path)
    assert resumed["step"] == 3 and resumed["digest"] == state_digest(state(3))


@pytest.mark.slow  # > 1 s on two cores
def test_a_late_copy_is_read_back_until_it_matches(tmp_path: Path) -> None:
    late = subprocess.Popen([sys.executable, LATE, str(tmp_path / "drive"), str(tmp_path), "0.6"])
    proc = _child(tmp_path, 1, 1, "late", str(tmp_path))
    assert proc.wait(timeout=60) == 0 and late.wait(timeout=30) == 0
    (event,) = _events(tmp_path, "ckpt_mirrored")
    assert event["detail"]["reads"] > 1 and event["detail"]["seconds"] >= 0.5
    copy = tmp_path / "drive" / _pointer(tmp_path)["file"]
    assert event["detail"]["bytes"] == copy.stat().st_size
    assert _pointer(tmp_path)["step"] == 1
    resumed = _resume_in_fresh_process(tmp_path)
    assert resumed["digest"] == state_digest(state(1))


def test_a_copy_that_stays_late_is_reported_lagging_not_latest(tmp_path: Path) -> None:
    _save_here(tmp_path, 1)
    late = subprocess.Popen([sys.executable, LATE, str(tmp_path / "drive"), str(tmp_path), "-1"])
    proc = _child(tmp_path, 2, 2, "late", str(tmp_path), RGT_CKPT_MIRROR_WAIT_S="0.4")
    assert proc.wait(timeout=60) == 0 and late.wait(timeout=30) == 0
    (event,) = _events(tmp_path, "ckpt_mirror_lagging")
    assert event["severity"] == "warning" and event["detail"]["step"] == 2
    assert event["detail"]["newest_verified_step"] == 1 and event["detail"]["reads"] >= 2
    assert "RGT_CKPT_MIRROR_WAIT_S" in event["next"]
    drive = tmp_path / "drive"
    assert not (drive / "ckpt-000000000002.json").exists()
    assert not [p for p in drive.iterdir() if p.name.startswith(".tmp-")]
    assert _pointer(tmp_path)["step"] == 1
    # The local disk still has step 2: this session resumes from it, a new one from step 1.
    local = Checkpointer(tmp_path / "local", mirror=drive)
    assert local.load_latest()["step"] == 2
    assert _resume_in_fresh_process(tmp_path)["step"] == 1


def test_an_unreachable_mirror_never_fails_the_save(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the mirror folder should be")
    ckpt = Checkpointer(tmp_path / "local", mirror=blocker / "drive")
    info = ckpt.save(state(1), 1)
    with pytest.warns(CheckpointFallbackWarning, match="cannot read the checkpoint mirror"):
        assert info.step == 1 and ckpt.latest_info() is not None
    assert ckpt.mirror is not None and not (blocker / "drive").exists()
