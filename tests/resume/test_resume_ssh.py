"""Scripts not written for rgt, run over a real sshd the way the README shows: kill -9 of the
trainer mid-run → the agent restarts it with its resume form from the newest checkpoint, and
the step count continues; a script that saves only at the end restarts from zero, with a
warning event."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import sys
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from tests import clirun
from tests.clirun import ok
from tests.sshd import SshServer, wait_for

SCRIPTS = Path(__file__).parent / "scripts"
pytestmark = pytest.mark.slow


rgt = partial(clirun.rgt, timeout=300)


class Machine:
    def __init__(self, server: SshServer, tmp_path: Path) -> None:
        self.root = tmp_path / "durable root"
        self.project = tmp_path / "project"
        self.project.mkdir()
        for script in SCRIPTS.glob("*.py"):
            shutil.copy(script, self.project / script.name)
        ok(rgt("up", "generic-ssh", "--name", "box", "--ssh", server.ssh_line,
               "--root", str(self.root), "--json"))  # fmt: skip

    def run(self, *args: str) -> str:
        launched = ok(rgt("run", "box", "--probe-seconds", "0", "--json", *args, cwd=self.project))
        return str(launched["job_id"])

    def job_dir(self, job_id: str) -> Path:
        return self.root / ".rgt" / "jobs" / job_id

    def log(self, job_id: str, attempt: int) -> str:
        path = self.job_dir(job_id) / "logs" / f"attempt-{attempt}.log"
        return path.read_text() if path.exists() else ""

    def kill_trainer_when(self, job_id: str, pattern: str) -> str:
        """kill -9 the trainer once its first attempt's log matches ``pattern``."""
        assert wait_for(lambda: re.search(pattern, self.log(job_id, 1)), timeout=180), self.log(
            job_id, 1
        )
        status = json.loads((self.job_dir(job_id) / "status.json").read_text())
        os.kill(status["pid"], signal.SIGKILL)
        return self.log(job_id, 1)

    def finish(self, job_id: str) -> list[dict[str, Any]]:
        assert ok(rgt("watch", job_id, "--json"))["state"] == "succeeded", self.log(job_id, 2)
        lines = (self.job_dir(job_id) / "events.jsonl").read_text().splitlines()
        return [json.loads(line) for line in lines]


@pytest.fixture
def box(sshd_server: SshServer, tmp_path: Path) -> Machine:
    return Machine(sshd_server, tmp_path)


def kinds(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e for e in events if e["kind"] == kind]


def test_nanogpt_style_resumes_from_out_ckpt(box: Machine) -> None:
    job = box.run("--resume-with", "--init_from=resume", "--ckpt", "out/ckpt.pt", "--",
                  sys.executable, "train_nano.py", "--max_iters=200")  # fmt: skip
    # Killed right after its second save finished (the next iteration already logged).
    before = box.kill_trainer_when(job, r"step 50: .*\nsaving checkpoint to out\niter 50:")
    events = box.finish(job)

    [resuming] = kinds(events, "resuming")
    assert resuming["attempt"] == 2 and resuming["detail"]["ckpt"].endswith("out/ckpt.pt")
    assert resuming["detail"]["command"][-1] == "--init_from=resume"
    after = box.log(job, 2)
    assert "Resuming training from out" in after and "from scratch" not in after
    first_step = int(re.search(r"step (\d+):", after).group(1))  # type: ignore[union-attr]
    last_before = max(int(n) for n in re.findall(r"iter (\d+):", before))
    assert first_step >= 50 and first_step <= last_before + 1  # no step lost, none repeated
    assert not kinds(events, "restart_from_zero")
    assert "resume form" in kinds(events, "retrying")[0]["next"]


def test_hf_example_style_resumes_from_the_newest_checkpoint_folder(box: Machine) -> None:
    job = box.run("--resume-with", "--resume_from_checkpoint {ckpt}", "--ckpt",
                  "out/checkpoint-*", "--", sys.executable, "train_hf.py", "--output_dir", "out",
                  "--max_steps", "150")  # fmt: skip
    box.kill_trainer_when(job, r"'step': 70\}")
    events = box.finish(job)

    [resuming] = kinds(events, "resuming")
    ckpt = resuming["detail"]["ckpt"]
    saved = int(ckpt.rsplit("-", 1)[1])
    assert ckpt.endswith(f"out/checkpoint-{saved}") and saved >= 60
    assert resuming["detail"]["command"][-2:] == ["--resume_from_checkpoint", ckpt]
    after = box.log(job, 2)
    assert f"Continuing training from global step {saved}" in after
    assert f"'train_steps_this_run': {150 - saved}" in after


def test_a_script_that_saves_only_at_the_end_restarts_from_zero_with_a_warning(
    box: Machine,
) -> None:
    job = box.run("--resume-with", "--init_from=resume", "--ckpt", "out/model.pt", "--",
                  sys.executable, "train_end.py", "--max_iters=120")  # fmt: skip
    box.kill_trainer_when(job, r"iter 30:")
    events = box.finish(job)

    [warning] = kinds(events, "restart_from_zero")
    assert warning["severity"] == "warning" and warning["attempt"] == 2
    assert warning["next"].startswith("restarting from zero: no checkpoint found")
    assert "out/model.pt" in warning["next"]
    assert re.search(r"^iter 0:", box.log(job, 2), re.MULTILINE)
    assert "from zero" in kinds(events, "retrying")[0]["next"]
    assert not kinds(events, "resuming")
