"""Job directories laid out as ``rgt run`` lays them out, run by the real agent zipapp.

The same layout as tests/agent/conftest.py's ``Job`` (a code snapshot, ``code`` linking to it,
``spec.json``), without pytest: ``python3 agent-<version>.pyz run JOBDIR`` in its own session,
as a backend starts it. Everything waits against a deadline, so a step can never hang the check.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _core import kill_carrying

from rgt import _fs
from rgt.agent import jobfiles
from rgt.agent._system import process_belongs_to_job
from rgt.agent.paths import RootPaths
from rgt.models import JobSpec, RetryPolicy

TERMINAL = ("succeeded", "failed", "cancelled")
HERE = Path(__file__).resolve().parent

FAKE_SMI = """#!/bin/sh
# A recorded nvidia-smi answer (tests/golden/nvidia-smi), for the CPU dry run only.
if [ "$1" != "--query-gpu=index,uuid,name,memory.used,memory.total" ] || \\
   [ "$2" != "--format=csv,noheader,nounits" ]; then
  echo "fake nvidia-smi: unexpected arguments: $*" >&2; exit 2
fi
cat "$FAKE_NVIDIA_SMI_OUTPUT"
"""


def fake_nvidia_smi(bin_dir: Path) -> Path:
    bin_dir.mkdir(parents=True, exist_ok=True)
    path = bin_dir / "nvidia-smi"
    path.write_text(FAKE_SMI)
    path.chmod(0o755)
    return path


class AgentJob:
    """One job, its own snapshot of ``files`` (names in tools/gpu_check), run by ``pyz``."""

    def __init__(self, pyz: Path, durable: Path, job_id: str) -> None:
        self.pyz, self.job_id = pyz, job_id
        self.root_paths = RootPaths(str(durable))
        self.paths = self.root_paths.job(job_id)
        self.dir = Path(self.paths.root)
        self.agent: subprocess.Popen[bytes] | None = None

    def write(self, files: list[str], command: list[str], **spec: Any) -> AgentJob:
        snapshot = Path(self.root_paths.snapshot(f"snap-{self.job_id}"))
        snapshot.mkdir(parents=True, exist_ok=True)
        for name in files:
            shutil.copy(HERE / name, snapshot / name)
        self.dir.mkdir(parents=True, exist_ok=True)
        os.symlink(f"../../code/snap-{self.job_id}", self.paths.code)
        spec.setdefault("retry", RetryPolicy(max_retries=2, backoff_s=0.2))
        job = JobSpec(self.job_id, "local", tuple(command), **spec)
        _fs.atomic_write_json(self.paths.spec, job.to_json())
        return self

    def start(self, env: dict[str, str]) -> AgentJob:
        env = dict(env, RGT_AGENT_HEARTBEAT_S="0.2", RGT_AGENT_CANCEL_GRACE_S="5")
        with open(self.dir / "agent.out", "ab") as sink:
            self.agent = subprocess.Popen(
                [sys.executable, str(self.pyz), "run", str(self.dir)],
                env=env,
                start_new_session=True,
                stdin=subprocess.DEVNULL,
                stdout=sink,
                stderr=subprocess.STDOUT,
            )
        return self

    def status(self) -> dict[str, Any]:
        try:
            return dict(json.loads(Path(self.paths.status).read_text()))
        except (OSError, ValueError):
            return {}

    def events(self, kind: str | None = None) -> list[dict[str, Any]]:
        try:
            text = Path(self.paths.events).read_text()
        except OSError:
            return []
        found = jobfiles.parse_events(text)[0]  # the agent's own reader: a cut line is skipped
        return [e for e in found if kind is None or e.get("kind") == kind]

    def wait_for(
        self, what: str, ok: Callable[[dict[str, Any]], bool], deadline: float
    ) -> dict[str, Any]:
        while time.monotonic() < deadline:
            status = self.status()
            if status and ok(status):
                return status
            time.sleep(0.05)
        raise TimeoutError(f"{self.job_id}: {what} never happened; last status {self.status()}")

    def ended(self, deadline: float) -> dict[str, Any]:
        return self.wait_for("a terminal state", lambda s: s.get("state") in TERMINAL, deadline)

    def wait_file(self, rel: str, deadline: float) -> Path:
        path = self.dir / rel
        while not path.exists():
            if time.monotonic() > deadline or self.status().get("state") in TERMINAL:
                raise TimeoutError(f"{self.job_id}: {rel} never appeared; {self.status()}")
            time.sleep(0.05)
        return path

    def stop_hold(self, deadline: float) -> dict[str, Any]:
        """End a ``hold.py`` job the way it expects: STOP in its directory."""
        (self.dir / "STOP").write_text("")
        return self.ended(deadline)

    def kill_agent(self) -> None:
        """``kill -9`` of the agent alone (its job runs on in its own process group)."""
        if self.agent is not None and self.agent.poll() is None:
            os.killpg(self.agent.pid, signal.SIGKILL)
            self.agent.wait()

    def log_tail(self, limit: int = 4000) -> str:
        path = self.dir / "agent.log"
        return path.read_text(errors="replace")[-limit:] if path.exists() else ""

    def cleanup(self) -> None:
        """Whatever of this job still runs: the agent, then every process the agent started
        for it (they carry ``RGT_JOB_DIR``; torchrun's ranks each run in a session of their
        own, so the job's process group alone would miss them)."""
        self.kill_agent()
        pid = self.status().get("pid")
        if isinstance(pid, int) and process_belongs_to_job(pid, str(self.dir)):
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)
        kill_carrying(f"RGT_JOB_DIR={self.dir}")


def process_gone(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[-1].split()[0] in ("Z", "X")
