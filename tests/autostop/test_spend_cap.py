"""The spend cap loses no work: at the cap the running rgt.ckpt training script is asked to
checkpoint (SIGTERM to its agent, forwarded; rgt.ckpt's signal save), the watcher waits for the
commit, and only then runs the stop; warnings at 80 % and 95 % come first. Resumed later from
that checkpoint, the run ends exactly where an uninterrupted one ends."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.autostop.helpers import arm, events, kinds, project, recorder, run_job, stops, wait_for
from tests.clirun import ok, rgt
from tests.sshd import SshServer

# A deterministic "training" loop on rgt.ckpt: the state is an LCG and a running sum, saved every
# 50 steps and once more when a signal asks; the final state depends on every step exactly once.
TRAIN = """
import json, os, signal, sys, time
from rgt.ckpt import Checkpointer

ckpt = Checkpointer.from_env()
ckpt.install_signal_handler()
state = ckpt.load_latest() or {"step": 0, "w": 1, "total": 0}
print("start at step", state["step"], flush=True)
steps, pause = int(sys.argv[1]), float(sys.argv[2])
while state["step"] < steps:
    state["w"] = (state["w"] * 1103515245 + 12345) % 2 ** 31
    state["total"] = (state["total"] + state["w"]) % 2 ** 61
    state["step"] += 1
    if state["step"] % 50 == 0 or ckpt.should_stop:
        ckpt.save(dict(state), step=state["step"])
    if ckpt.should_stop:
        ckpt.wait()
        print("checkpointed at step", state["step"], "on signal", flush=True)
        signal.signal(ckpt.stop_signal, signal.SIG_DFL)
        os.kill(os.getpid(), ckpt.stop_signal)
    time.sleep(pause)
out = os.environ.get("RGT_OUTPUT_DIR", ".")
open(os.path.join(out, "final.json"), "w").write(json.dumps(state))
"""
STEPS = 1500


def reference() -> dict[str, int]:
    state = {"step": 0, "w": 1, "total": 0}
    while state["step"] < STEPS:
        state["w"] = (state["w"] * 1103515245 + 12345) % 2**31
        state["total"] = (state["total"] + state["w"]) % 2**61
        state["step"] += 1
    return state


@pytest.mark.slow
def test_the_cap_checkpoints_commits_then_stops_and_the_resume_is_exact(
    tmp_path: Path, sshd_server: SshServer
) -> None:
    root, record = tmp_path / "root", tmp_path / "STOP"
    up = rgt(
        "up", "generic-ssh", "--name", "gpu", "--ssh", sshd_server.ssh_line, "--root", str(root),
        "--price", "3600", "--self-stop", recorder(record),
    )  # fmt: skip
    assert up.returncode == 0, up.stderr
    job = run_job("gpu", project(tmp_path, TRAIN), "python3", "train.py", str(STEPS), "0.02")
    budget = ok(rgt("status", "--json", "--full"))  # the ledger's spend so far, then + 14
    spent = next(c["cost_so_far"] for c in budget["billing"]["costs"] if c["machine"] == "gpu")
    code, seen = arm("gpu", "--budget", f"{spent + 14:.2f}USD")
    assert code == 0, seen
    assert wait_for(lambda: stops(record), 90), kinds(root)
    found = kinds(root)
    assert found.index("budget_80") < found.index("budget_95") < found.index("autostop_fired")
    asked = next(e for e in events(root) if e["kind"] == "autostop_checkpoint")
    assert asked["detail"]["jobs"] == [job]
    log = (root / ".rgt" / "jobs" / job / "logs" / "attempt-1.log").read_text()
    assert "checkpointed at step" in log  # the signal save ran before the stop
    saved = int(log.split("checkpointed at step", 1)[1].split()[0])
    assert 0 < saved < STEPS
    job_events = (root / ".rgt" / "jobs" / job / "events.jsonl").read_text()
    assert "agent_stopped" in job_events  # a resumable stop, not a failure
    resumed = rgt("resume", job, "--json")
    assert resumed.returncode == 0, resumed.stderr
    final = root / ".rgt" / "jobs" / job / "outputs" / "final.json"
    assert wait_for(final.exists, 120), (root / ".rgt" / "jobs" / job / "logs").iterdir()
    assert json.loads(final.read_text()) == reference()
    attempt2 = (root / ".rgt" / "jobs" / job / "logs" / "attempt-2.log").read_text()
    assert f"start at step {saved}" in attempt2
    assert len(stops(record)) == 1


@pytest.mark.slow
def test_the_at_time_checkpoints_first_too(tmp_path: Path) -> None:
    from datetime import datetime, timedelta

    root, record = tmp_path / "root", tmp_path / "STOP"
    up = rgt("up", "local", "--name", "box", "--root", str(root), "--self-stop", recorder(record))
    assert up.returncode == 0, up.stderr
    job = run_job("box", project(tmp_path, TRAIN), "python3", "train.py", str(STEPS), "0.02")
    when = (datetime.now().astimezone() + timedelta(seconds=8)).isoformat(timespec="seconds")
    code, seen = arm("box", "--at", when)
    assert code == 0, seen
    assert wait_for(lambda: stops(record), 60), kinds(root)
    log = (root / ".rgt" / "jobs" / job / "logs" / "attempt-1.log").read_text()
    assert "checkpointed at step" in log
    found = kinds(root)
    assert found.index("autostop_checkpoint") < found.index("autostop_fired")
