"""A notebook session end to end: `rgt up colab` on a tmpfs "Drive", a job that checkpoints
through the real agent, only verified checkpoints on the durable folder, the session clock's
warning with the resume commands, and a second session (a fresh local disk) that resumes from
Drive by running exactly those commands."""

from __future__ import annotations

import hashlib
import json
import shlex
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from rgt.ckpt import _store
from rgt.ckpt.mirror import POINTER
from tests.clirun import ok, rgt

COLAB = {"COLAB_RELEASE_TAG": "release-colab-test"}
CAP_S = 12 * 3600
TRAIN = """
import os, pathlib, time
from rgt.ckpt import Checkpointer
ckpt = Checkpointer.from_env(keep_last=2)
state = ckpt.load_latest()
start = 0 if state is None else state["step"]
print("resumed from", start, flush=True)
for step in range(start + 1, start + 4):
    ckpt.save({"step": step, "weights": bytes([step]) * 65536}, step)
(pathlib.Path(os.environ["RGT_OUTPUT_DIR"]) / "result.json").write_text('{"acc": %d}' % step)
# Stay alive until the session clock (the agent passes it on) has passed its 30-min mark.
ends = float(os.environ["RGT_SESSION_STARTED"]) + float(os.environ["RGT_SESSION_CAP_S"])
wait = ends - 1800 - time.time()
time.sleep(wait + 1.5 if 0 < wait < 60 else 0)
"""


def _run(machine: str, project: Path, *env: str, vm: dict[str, str] = COLAB) -> str:
    pairs = [arg for pair in env for arg in ("--env", pair)]
    doc = ok(rgt("run", machine, "--probe-seconds", "1", "--json", *pairs, "--",
                 sys.executable, "train.py", cwd=project, env=vm))  # fmt: skip
    job_id = str(doc["job_id"])
    watched = ok(rgt("watch", job_id, "--interval", "0.3", "--json", env=vm))
    assert watched["state"] == "succeeded", watched
    return job_id


def _events(root: str, job_id: str) -> list[dict[str, Any]]:
    path = Path(root) / ".rgt" / "jobs" / job_id / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def _verified_steps(mirror: Path) -> list[int]:
    infos = _store.list_committed(str(mirror))
    assert all(_store.read_verified(info) is not None for info in infos)
    assert not [p for p in mirror.iterdir() if p.name.startswith(".tmp-")]
    return [info.step for info in infos]


@pytest.mark.slow
def test_a_notebook_session_and_the_next_one(drive_mount: Path, tmp_path: Path) -> None:
    folder = drive_mount / "MyDrive" / "rgt runs ü"
    project = tmp_path / "proj"
    project.mkdir()
    (project / "train.py").write_text(TRAIN)
    first = ok(rgt("up", "colab", "--name", "nb", "--drive", str(folder),
                   "--root", str(tmp_path / "vm1"), "--json", env=COLAB))  # fmt: skip
    # The session has 30 min 8 s left: the agent warns at its first tick (60-min mark) and,
    # unless `rgt run` took longer than 8 s, again at the 30-min mark.
    ending_in = time.time() - CAP_S + 30 * 60 + 8
    job = _run("nb", project, f"RGT_SESSION_STARTED={ending_in:.0f}")
    mirror = folder / job / "ckpt"
    assert _verified_steps(mirror) == [3, 2]
    assert json.loads((mirror / POINTER).read_text())["step"] == 3
    events = _events(first["durable_root"], job)
    # The results and then the manifest reached Drive; the manifest vouches for what is there.
    manifest = json.loads((folder / job / "manifest.json").read_text())
    outputs = [e for e in manifest["files"] if not e["path"].startswith("ckpt/")]
    assert [e["path"] for e in outputs if e["path"].endswith("result.json")]
    for entry in outputs:
        copy = (folder / job / entry["path"]).read_bytes()
        assert hashlib.sha256(copy).hexdigest() == entry["sha256"]
    assert [e["kind"] for e in events].count("artifacts_mirrored") == 1
    mirrored = [e for e in events if e["kind"] == "ckpt_mirrored"]
    assert [e["detail"]["step"] for e in mirrored] == [1, 2, 3]
    # Which marks the agent saw depends on how long `rgt run` took (test_session_clock.py
    # pins the marks); it warned at least once, with the commands to resume.
    warnings = [e for e in events if e["kind"] == "session_ending"]
    assert warnings and all(e["severity"] == "warning" for e in warnings)
    ending = warnings[-1]
    sessions = ok(rgt("watch", "--once", "--no-gpu", "--json"))["sessions"]
    assert sessions[0]["machine"] == "nb" and 0 < sessions[0]["left_s"] <= CAP_S
    # A new session: a new VM (nothing local: no rgt state, no checkpoints), the same Drive;
    # run the commands the warning printed.
    vm2 = {**COLAB, "RGT_HOME": str(tmp_path / "vm2")}
    up, run = (shlex.split(cmd) for cmd in ending["next"].split("`")[1::2])
    assert up == ["rgt", "up", "colab", "--name", "nb", "--drive", str(folder)]
    second_vm = ok(rgt(*up[1:], "--json", env=vm2))
    assert run[:4] == ["rgt", "run", "nb", "--env"] and run[4] == f"RGT_CKPT_MIRROR={mirror}"
    second = _run("nb", project, run[4], vm=vm2)
    logs = Path(second_vm["durable_root"]) / ".rgt" / "jobs" / second / "logs"
    assert "resumed from 3" in (logs / "attempt-1.log").read_text()
    assert _verified_steps(mirror) == [6, 5]
