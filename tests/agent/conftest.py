"""Real agents on real job directories: the zipapp is built once, every job is a real process."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from rgt import _fs
from rgt.agent._system import process_belongs_to_job
from rgt.agent.build import build_agent
from rgt.agent.paths import JobPaths, RootPaths
from rgt.models import JobSpec, RetryPolicy

TERMINAL = ("succeeded", "failed", "cancelled")


@pytest.fixture(scope="session")
def agent_pyz(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_agent(tmp_path_factory.mktemp("agent-build"))


class Job:
    """One job directory laid out as `rgt run` lays it out, plus helpers to drive its agent."""

    def __init__(self, pyz: Path, durable: Path, job_id: str) -> None:
        self.pyz = pyz
        self.root_paths = RootPaths(str(durable))
        self.paths: JobPaths = self.root_paths.job(job_id)
        self.dir = Path(self.paths.root)
        self.agents: list[subprocess.Popen[bytes]] = []

    def write(self, script: str, **spec: Any) -> Job:
        """The job command is `python3 train.py` inside an immutable code snapshot."""
        snapshot = Path(self.root_paths.snapshot("snap1"))
        snapshot.mkdir(parents=True, exist_ok=True)
        (snapshot / "train.py").write_text(textwrap.dedent(script))
        self.dir.mkdir(parents=True, exist_ok=True)
        os.symlink("../../code/snap1", self.paths.code)
        spec.setdefault("retry", RetryPolicy(max_retries=2, backoff_s=0.05))
        job = JobSpec(self.paths.job_id, "local", (sys.executable, "train.py"), **spec)
        _fs.atomic_write_json(self.paths.spec, job.to_json())
        return self

    def env(self, **extra: str) -> dict[str, str]:
        env = dict(os.environ, RGT_AGENT_HEARTBEAT_S="0.1", RGT_AGENT_CANCEL_GRACE_S="2")
        env.update(extra)
        return env

    def start(self, secrets: dict[str, str] | None = None, **env: str) -> subprocess.Popen[bytes]:
        """Start `run` detached, the way a backend does (own session, no terminal)."""
        argv = [sys.executable, str(self.pyz), "run", str(self.dir)]
        if secrets is not None:
            argv.append("--secrets-stdin")
        proc = subprocess.Popen(
            argv,
            env=self.env(**env),
            start_new_session=True,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert proc.stdin is not None
        proc.stdin.write(json.dumps(secrets or {}).encode() if secrets is not None else b"")
        proc.stdin.close()
        self.agents.append(proc)
        return proc

    def agent_cmd(self, command: str, **env: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, str(self.pyz), command, str(self.dir)]
        return subprocess.run(
            argv, env=self.env(**env), capture_output=True, text=True, timeout=60, check=False
        )

    def status(self) -> dict[str, Any]:
        try:
            return dict(json.loads(Path(self.paths.status).read_text()))
        except (OSError, ValueError):
            return {}

    def events(self, kind: str | None = None) -> list[dict[str, Any]]:
        try:
            lines = Path(self.paths.events).read_text().splitlines()
        except OSError:
            return []
        events = [json.loads(line) for line in lines]
        return [e for e in events if kind is None or e["kind"] == kind]

    def wait_for(self, predicate: Callable[[dict[str, Any]], bool], timeout: float = 30) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status = self.status()
            if status and predicate(status):
                return status
            time.sleep(0.05)
        raise AssertionError(f"status never matched; last: {self.status()}\n{self.agent_log()}")

    def trainer_pid(self) -> int:
        """The running job's pid from status.json, once the agent has written it: the job can
        create its files before the agent records the pid it just started."""
        return int(self.wait_for(lambda status: status.get("pid") is not None)["pid"])

    def wait_file(self, rel: str, timeout: float = 30) -> Path:
        path = self.dir / rel
        deadline = time.monotonic() + timeout
        while not path.exists():
            assert time.monotonic() < deadline, f"{rel} never appeared\n{self.agent_log()}"
            time.sleep(0.05)
        return path

    def finish(self, timeout: float = 60) -> int:
        """Wait for the last agent started to exit; its exit code."""
        return self.agents[-1].wait(timeout=timeout)

    def agent_log(self) -> str:
        path = self.dir / "agent.log"
        return path.read_text() if path.exists() else ""

    def cleanup(self) -> None:
        for proc in self.agents:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        pid = self.status().get("pid")
        # Only a process that carries this job's RGT_JOB_DIR: never a recycled pid.
        if isinstance(pid, int) and process_belongs_to_job(pid, self.paths.root):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)


@pytest.fixture
def make_job(agent_pyz: Path, tmp_path: Path) -> Iterator[Callable[..., Job]]:
    jobs: list[Job] = []

    def factory(job_id: str = "job-1", durable: Path | None = None, pyz: Path | None = None) -> Job:
        job = Job(pyz or agent_pyz, durable or tmp_path / "durable", job_id)
        jobs.append(job)
        return job

    yield factory
    for job in jobs:
        job.cleanup()


def process_gone(pid: int) -> bool:
    """True when ``pid`` no longer runs (a zombie awaiting its reaper counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[-1].split()[0] in ("Z", "X")
