"""Public training scripts nobody here wrote, unmodified (tests/e2e_public/SOURCES.md), through
the real CLI on the local and the ssh backend (a real sshd): `rgt run` with the script's own
resume flag, kill -9 of the trainer after a checkpoint, the agent resumes it from that
checkpoint, the job succeeds, `rgt pull` verifies every file with zero BAD, and `rgt down`
refuses for one reason only: no human approval yet (no abandon anywhere).

The scripts are checked against the sha256 in SOURCES.md before each run: a changed script is a
failed test, never a silently different one.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from tests import clirun
from tests.clirun import ok
from tests.sshd import SshServer, wait_for

HERE = Path(__file__).parent
SCRIPTS = HERE / "scripts"
pytestmark = pytest.mark.slow
rgt = partial(clirun.rgt, timeout=300)


def _pinned() -> dict[str, str]:
    """file name -> sha256, from the table in SOURCES.md."""
    table = (HERE / "SOURCES.md").read_text()
    return dict(re.findall(r"^\| `([^`]+)` \|.*\| `([0-9a-f]{64})` \|$", table, re.MULTILINE))


@dataclass(frozen=True)
class Script:
    name: str
    file: str
    args: tuple[str, ...]
    ckpt: str  # --ckpt
    resume_with: str  # --resume-with, the script's own flag
    saved: Callable[[Path], int]  # the newest complete checkpoint's step in the job's work dir
    kill_after: int  # kill -9 once a checkpoint of at least this step is complete
    needs: tuple[str, ...]  # modules beyond the test extra
    step_of: str  # the step in a checkpoint's path
    resumed_says: str  # what the script itself prints when it resumes


def _accelerate_saved(work: Path) -> int:
    done = [p for p in work.glob("out/step_*") if (p / "random_states_0.pkl").is_file()]
    return max((int(p.name.split("_")[1]) for p in done), default=0)


def _lightning_saved(work: Path) -> int:
    steps = [re.search(r"step=(\d+)", p.name) for p in work.glob("lightning_logs/*/checkpoints/*")]
    return max((int(m.group(1)) for m in steps if m), default=0)


def _trainer_saved(work: Path) -> int:
    done = [p for p in work.glob("hfout/checkpoint-*") if (p / "trainer_state.json").is_file()]
    return max((int(p.name.split("-")[1]) for p in done), default=0)


DATA = ("--train_file", "data/train.txt", "--config_name", "data/config", "--tokenizer_name",
        "data/tokenizer", "--block_size", "32", "--per_device_train_batch_size", "4")  # fmt: skip
SCRIPTS_RUN = (
    Script(
        "accelerate", "deepspeed_with_config_support.py",
        (*DATA, "--model_type", "gpt2", "--num_train_epochs", "2", "--checkpointing_steps", "10",
         "--output_dir", "out"),
        "out/step_*", "--resume_from_checkpoint {ckpt}", _accelerate_saved, 20,
        ("datasets", "deepspeed"), r"step_(\d+)$", "Resumed from checkpoint: ",
    ),
    Script(
        "lightning", "main.py",
        ("fit", "--trainer.max_epochs", "12", "--trainer.enable_progress_bar", "false"),
        "lightning_logs/version_*/checkpoints/*.ckpt", "--ckpt_path {ckpt}", _lightning_saved, 128,
        ("jsonargparse",), r"step=(\d+)\.ckpt$", "Restored all states from the checkpoint",
    ),
    Script(
        "transformers", "run_clm.py",
        (*DATA, "--do_train", "--output_dir", "hfout", "--max_steps", "60", "--save_steps", "20",
         "--logging_steps", "10", "--use_cpu", "--report_to", "none", "--disable_tqdm", "true"),
        "hfout/checkpoint-*", "--resume_from_checkpoint {ckpt}", _trainer_saved, 20,
        ("datasets", "evaluate"), r"checkpoint-(\d+)$", "Resuming training from checkpoint",
    ),
)  # fmt: skip


class Box:
    """One machine named ``box`` with a project holding the script and the data it reads."""

    def __init__(self, tmp_path: Path, up: tuple[str, ...]) -> None:
        self.root = tmp_path / "durable root"
        self.project = tmp_path / "project"
        self.hf_home = tmp_path / "hf-home"
        self.project.mkdir()
        ok(rgt("up", *up, "--name", "box", "--root", str(self.root), "--json"))

    def stage(self, script: Script) -> None:
        missing = [m for m in script.needs if importlib.util.find_spec(m) is None]
        if missing:
            pytest.skip(f"{script.name}: needs {', '.join(missing)} (tests/e2e_public/README.md)")
        source = SCRIPTS / script.file
        if not source.is_file():
            pytest.skip(f"{script.file} is not vendored here (tests/e2e_public/SOURCES.md)")
        digest = hashlib.sha256(source.read_bytes()).hexdigest()
        assert digest == _pinned()[script.file], f"{script.file} differs from its pinned source"
        shutil.copy(source, self.project / script.file)
        subprocess.run([sys.executable, "-m", "tests.e2e_public.data", str(self.project / "data")],
                       check=True, cwd=HERE.parents[1], timeout=300)  # fmt: skip

    def run(self, script: Script) -> str:
        env = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_HOME": str(self.hf_home)}
        if os.environ.get("PYTHONPATH"):  # a package installed beside the venv (deepspeed)
            env["PYTHONPATH"] = os.environ["PYTHONPATH"]
        flags = [f"--env={k}={v}" for k, v in env.items()]
        launched = ok(rgt("run", "box", "--probe-seconds", "0", "--json", *flags,
                          "--ckpt", script.ckpt, "--resume-with", script.resume_with, "--",
                          sys.executable, script.file, *script.args, cwd=self.project))  # fmt: skip
        return str(launched["job_id"])

    def job_dir(self, job_id: str) -> Path:
        return self.root / ".rgt" / "jobs" / job_id

    def log(self, job_id: str, attempt: int) -> str:
        path = self.job_dir(job_id) / "logs" / f"attempt-{attempt}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def kill_trainer_after(self, job_id: str, script: Script) -> int:
        work = self.job_dir(job_id) / "work"
        assert wait_for(lambda: script.saved(work) >= script.kill_after, timeout=240), self.log(
            job_id, 1
        )[-3000:]
        status = json.loads((self.job_dir(job_id) / "status.json").read_text())
        os.kill(status["pid"], signal.SIGKILL)
        return script.saved(work)

    def events(self, job_id: str) -> list[dict[str, Any]]:
        lines = (self.job_dir(job_id) / "events.jsonl").read_text().splitlines()
        return [json.loads(line) for line in lines]


@pytest.fixture
def local_box(tmp_path: Path) -> Box:
    return Box(tmp_path, ("local",))


@pytest.fixture
def ssh_box(sshd_server: SshServer, tmp_path: Path) -> Box:
    return Box(tmp_path, ("generic-ssh", "--ssh", sshd_server.ssh_line))


def _kill_resume_pull_down(box: Box, script: Script, tmp_path: Path) -> None:
    box.stage(script)
    job = box.run(script)
    killed_at = box.kill_trainer_after(job, script)
    watched = ok(rgt("watch", job, "--json", timeout=600))
    assert watched["state"] == "succeeded", box.log(job, 2)[-3000:]
    [resuming] = [e for e in box.events(job) if e["kind"] == "resuming"]
    assert resuming["attempt"] == 2, resuming
    ckpt = resuming["detail"]["ckpt"]
    step = re.search(script.step_of, ckpt)
    assert step and script.kill_after <= int(step.group(1)) <= killed_at, (ckpt, killed_at)
    assert resuming["detail"]["command"][-1] == ckpt, resuming
    assert script.resumed_says in box.log(job, 2), box.log(job, 2)[-3000:]
    _assert_pulled_without_bad(job, tmp_path / "pulled", watched["reason"])
    _assert_down_lacks_only_the_approval()


def _assert_pulled_without_bad(job: str, dest: Path, said: str) -> None:
    """Zero BAD, and the agent (its watch line), pull and verify count the same files the same
    way: "N verified" means one thing everywhere."""
    pulled = rgt("pull", job, "--to", str(dest), "--json")
    assert pulled.returncode == 0, pulled.stdout[-3000:] + pulled.stderr[-3000:]
    pull_doc = json.loads(pulled.stdout)
    assert pull_doc["ok"] is True and pull_doc["verify"]["summary"]["bad"] == 0, pull_doc
    checked = rgt("verify", "artifacts", str(dest), "--json")
    doc = json.loads(checked.stdout)
    bad = [f for f in doc["files"] if f["verdict"] == "bad"]
    assert checked.returncode == 0 and not bad and doc["summary"]["bad"] == 0, bad or doc
    counted = r"(\d+) artifact\(s\)[^:]*: (\d+) ok, (\d+) hash_only.*?, (\d+) bad"
    agent = re.search(counted, said)
    assert agent, said
    print(f"{job}: agent: {said}; pull: {pull_doc['verify']['summary']}")  # the record (-rP)
    for summary in (pull_doc["verify"]["summary"], doc["summary"]):
        counts = (summary["files"], summary["ok"], summary["hash_only"], summary["bad"])
        assert counts == tuple(int(n) for n in agent.groups()), (said, summary)


def _assert_down_lacks_only_the_approval() -> None:
    refused = rgt("down", "box", "--json")
    assert refused.returncode == 3, refused.stdout + refused.stderr
    checks = json.loads(refused.stdout)["verdict"]["checks"]
    assert [c["name"] for c in checks if not c["ok"]] == ["approved"], checks


@pytest.mark.parametrize("script", SCRIPTS_RUN, ids=lambda s: s.name)
def test_public_script_on_the_local_backend(local_box: Box, script: Script, tmp_path: Path) -> None:
    _kill_resume_pull_down(local_box, script, tmp_path)


@pytest.mark.parametrize("script", SCRIPTS_RUN, ids=lambda s: s.name)
def test_public_script_over_ssh(ssh_box: Box, script: Script, tmp_path: Path) -> None:
    _kill_resume_pull_down(ssh_box, script, tmp_path)
