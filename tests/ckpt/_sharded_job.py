"""Drive ``_sharded_train.py`` under ``torchrun`` through the real ``rgt run`` on the local
backend, ``kill -9`` the drawn rank at each drawn step, and read back what every attempt did.

``run_job`` launches the job, waits for each victim's pid file and kills that rank from outside
(the agent sees a torchrun group with one rank SIGKILLed and no OOM evidence), then waits for a
terminal state. ``JobRun`` holds the per-rank losses of every attempt, the resumes rank 0 noted
(newest committed step on disk against the step it loaded), the final digest, and the agent's
events, so tests can check exactness, lost committed steps, labels and resumes.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.faults.harness import PY, rgt

SCRIPT = Path(__file__).with_name("_sharded_train.py")
TERMINAL = ("succeeded", "failed", "cancelled")
LAUNCH = threading.Lock()  # the CLI is forked from this process: one fork at a time


@dataclass(frozen=True)
class Kill:
    attempt: int
    step: int
    rank: int
    phase: str  # "step": before that step's save; "save": right after it returned

    def spec(self) -> str:
        return f"{self.attempt}:{self.step}:{self.rank}:{self.phase}"


@dataclass
class JobRun:
    job_dir: Path
    status: dict[str, Any]
    events: list[dict[str, Any]]
    losses: dict[int, list[tuple[int, int, str]]] = field(default_factory=dict)
    resumes: list[tuple[int, int, int]] = field(default_factory=list)
    final: str = ""

    def per_step(self, rank: int) -> dict[int, set[str]]:
        """step -> every loss any attempt logged for it on ``rank``."""
        out: dict[int, set[str]] = {}
        for _, step, loss in self.losses.get(rank, []):
            out.setdefault(step, set()).add(loss)
        return out

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [event for event in self.events if event.get("kind") == kind]


def machine(base: Path, ssh_line: str | None = None) -> tuple[Path, Path, Path]:
    """(RGT_HOME, machine root, project): a machine named ``box`` (this one, or the sshd on
    loopback that ``ssh_line`` reaches: same host, so its files are read here) and the script."""
    home, root, project = base / "home", base / "root", base / "project"
    project.mkdir(parents=True)
    shutil.copy(SCRIPT, project / "train.py")
    kind = ("generic-ssh", "--ssh", ssh_line) if ssh_line else ("local",)
    up = rgt(home, "up", *kind, "--name", "box", "--root", str(root), "--json")
    assert up.code == 0, str(up)
    return home, root, project


def run_job(
    where: tuple[Path, Path, Path], world: int, steps: int, kills: list[Kill], bound: float = 600
) -> JobRun:
    home, root, project = where
    with LAUNCH:
        launched = _launch(home, project, world, steps, kills)
    assert launched.code == 0, str(launched)
    job_dir = root / ".rgt" / "jobs" / launched.doc()["job_id"]
    deadline = time.monotonic() + bound
    for kill in kills:
        pid_file = job_dir / "outputs" / f"victim-{kill.attempt}.pid"
        _until(lambda f=pid_file: f.exists() or _ended(job_dir), deadline, job_dir)
        assert pid_file.exists(), f"attempt {kill.attempt} never reached {kill}: {_status(job_dir)}"
        os.kill(int(pid_file.read_text()), signal.SIGKILL)
    _until(lambda: _ended(job_dir), deadline, job_dir)
    return read(job_dir)


def _launch(home: Path, project: Path, world: int, steps: int, kills: list[Kill]) -> Any:
    return rgt(
        home, "run", "box", "--probe-seconds", "0.5", "--retries", str(len(kills) + 1), "--json",
        "--env", f"SHARD_STEPS={steps}",
        "--env", f"SHARD_KILLS={','.join(k.spec() for k in kills)}",
        "--env", "OMP_NUM_THREADS=1",
        "--", PY, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={world}",
        "train.py", cwd=project, bound=60,
    )  # fmt: skip


def read(job_dir: Path) -> JobRun:
    out = job_dir / "outputs"
    run = JobRun(job_dir, _status(job_dir), _events(job_dir))
    for path in sorted(out.glob("losses-rank*.txt")):
        rank = int(path.stem.removeprefix("losses-rank"))
        rows = [line.split() for line in path.read_text().splitlines()]
        run.losses[rank] = [(int(a), int(s), loss) for a, s, loss in rows]
    if (out / "resumes.txt").exists():
        rows = [line.split() for line in (out / "resumes.txt").read_text().splitlines()]
        run.resumes = [(int(a), int(newest), int(loaded)) for a, newest, loaded in rows]
    if (out / "final.txt").exists():
        run.final = (out / "final.txt").read_text().strip()
    return run


def _until(predicate: Any, deadline: float, job_dir: Path) -> None:
    while not predicate():
        if time.monotonic() > deadline:
            log = job_dir / "agent.log"
            tail = log.read_text()[-3000:] if log.exists() else ""
            raise AssertionError(f"no progress within the bound: {_status(job_dir)}\n{tail}")
        time.sleep(0.1)


def _status(job_dir: Path) -> dict[str, Any]:
    try:
        return dict(json.loads((job_dir / "status.json").read_text()))
    except (OSError, ValueError):
        return {}


def _ended(job_dir: Path) -> bool:
    return _status(job_dir).get("state") in TERMINAL


def _events(job_dir: Path) -> list[dict[str, Any]]:
    path = job_dir / "events.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return [json.loads(line) for line in lines if line.strip()]
