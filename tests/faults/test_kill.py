"""kill -9 at a random (seeded) moment: of the CLI during `run`, `pull` and `push`, of the
agent, and of the training process.

After each kill the trial asks the real CLI what happened and checks: every answer comes
within the bound; nothing outside the destination changed; a pull or push run again completes
and verifies; a job whose agent died can be resumed and does not lose its newest good
checkpoint; success is only ever reported for artifacts that are really there.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from rgt.ckpt import Checkpointer
from tests.faults.harness import (
    PY,
    assert_pulled_exactly,
    assert_untouched,
    kill_processes_of,
    rng,
    sha256,
    snapshot,
    start,
    wait_until,
)
from tests.faults.world import World, job_env

TRIALS = 7
BOUND_S = 25.0  # a resumed or retried job of ~1.5 s reaches a terminal state within this
TERMINAL = ("succeeded", "failed", "cancelled")


def _kill_at(world: World, args: tuple[str, ...], delay: float, cwd: Path | None = None) -> None:
    cli = start(world.home, *args, cwd=cwd)
    try:
        cli.finish(delay)  # returns early if it ended by itself
        cli.kill()
        cli.finish(10)
    finally:
        cli.close()


def _status(world: World, job_id: str) -> dict[str, Any]:
    out = world.cli("status", job_id, "--json")
    assert "Traceback" not in out.stderr, str(out)
    doc = out.doc()
    return dict(doc["jobs"][0]) if out.code == 0 and doc and doc.get("jobs") else {}


def _until_terminal(world: World, job_id: str) -> dict[str, Any]:
    seen: dict[str, Any] = {}

    def ended() -> bool:
        seen.update(_status(world, job_id))
        return seen.get("state") in TERMINAL

    assert wait_until(ended, BOUND_S, step=0.5), f"no terminal state within the bound: {seen}"
    return seen


def _stop_jobs(world: World) -> None:
    """Processes of the trial's own job directories only (never the world's finished job)."""
    jobs = (world.root / ".rgt" / "jobs").glob("*")
    kill_processes_of([str(p) for p in jobs if p.name != world.job_id])


@pytest.fixture
def world_k(fresh: World) -> Any:
    yield fresh
    _stop_jobs(fresh)


@pytest.mark.parametrize("i", range(TRIALS))
def test_kill_cli_during_pull(world_k: World, i: int) -> None:
    area = world_k.trial_dir(f"kill-pull-{i}")
    dest = area / "dest"
    before = snapshot(area)
    delay = rng("kill-pull", i).uniform(0.0, 0.9)
    _kill_at(world_k, ("pull", world_k.job_id, "--to", str(dest), "--json"), delay)
    assert_untouched(before, snapshot(area, skip=[dest]), area)
    again = world_k.cli("pull", world_k.job_id, "--to", str(dest), "--json")
    assert again.code == 0 and again.doc()["ok"] is True, f"no clean resume:\n{again}"
    assert_pulled_exactly(dest, world_k.files)


@pytest.mark.parametrize("i", range(TRIALS))
def test_kill_cli_during_push(world_k: World, i: int) -> None:
    r = rng("kill-push", i)
    for n in range(40):
        (world_k.project / f"m{n:02d}.py").write_text(
            f"# module {n}\n" + "x = 1\n" * r.randrange(1, 4000)
        )
    _kill_at(world_k, ("push", "box", "--json"), r.uniform(0.0, 1.2), cwd=world_k.project)
    again = world_k.cli("push", "box", "--json", cwd=world_k.project)
    assert again.code == 0, f"push after a killed push failed:\n{again}"
    remote = Path(again.doc()["remote"])
    for path in world_k.project.iterdir():
        landed = remote / path.name
        assert landed.is_file() and sha256(landed) == sha256(path), (
            f"push reported success, but {path.name} on the machine differs"
        )


@pytest.mark.parametrize("i", range(TRIALS))
def test_kill_cli_during_run(world_k: World, i: int) -> None:
    before = snapshot(world_k.project)
    args = ("run", "box", "--probe-seconds", "5", "--json", *job_env(files=2), "--", PY, "job.py")
    _kill_at(world_k, args, rng("kill-run", i).uniform(0.0, 1.5), cwd=world_k.project)
    assert_untouched(before, snapshot(world_k.project), world_k.project)
    out = world_k.cli("status", "--json")
    assert out.code == 0, f"status after a killed run:\n{out}"
    for job in out.doc()["jobs"]:
        if job["job_id"] == world_k.job_id:
            continue
        if (world_k.root / ".rgt" / "jobs" / job["job_id"] / "spec.json").exists():
            _assert_true_success(world_k, job["job_id"], _until_terminal(world_k, job["job_id"]))
        else:
            assert job["state"] not in ("running", "succeeded"), f"never launched, yet: {job}"


def _assert_true_success(world: World, job_id: str, status: dict[str, Any]) -> None:
    if status["state"] != "succeeded":
        assert status.get("reason"), f"a job ended {status['state']} without a reason: {status}"
        return
    dest = world.base / "trials" / f"pulled-{job_id}"
    out = world.cli("pull", job_id, "--to", str(dest), "--json")
    assert out.code == 0 and out.doc()["ok"] is True, f"succeeded, but does not verify:\n{out}"


def _launch_long(world: World) -> tuple[str, Path]:
    args = ["--probe-seconds", "0", "--json", *job_env(files=2, steps=10, step_s=0.15)]
    out = world.cli("run", "box", *args, "--", PY, "job.py", cwd=world.project)
    assert out.code == 0, str(out)
    job_id = str(out.doc()["job_id"])
    return job_id, world.root / ".rgt" / "jobs" / job_id


def _newest_step(job_dir: Path) -> int:
    info = Checkpointer(job_dir / "ckpt", keep_last=None).latest_info()
    return info.step if info else 0


def _pid(job_dir: Path, key: str) -> int | None:
    with contextlib.suppress(OSError, ValueError):
        value = json.loads((job_dir / "status.json").read_text()).get(key)
        return value if isinstance(value, int) else None
    return None


@pytest.mark.parametrize(
    ("who", "i"), [(w, i) for w in ("agent", "trainer") for i in range(TRIALS)]
)
def test_kill_agent_or_trainer(world_k: World, who: str, i: int) -> None:
    job_id, job_dir = _launch_long(world_k)
    assert wait_until(lambda: _pid(job_dir, "pid") is not None, 15), "the job never started"
    time.sleep(rng("kill-job", who, i).uniform(0.0, 1.4))
    pid = _pid(job_dir, "agent_pid" if who == "agent" else "pid")
    kept = _newest_step(job_dir)
    if pid is not None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    if who == "agent":
        _resume_until_agent(world_k, job_id)
    status = _until_terminal(world_k, job_id)
    assert _newest_step(job_dir) >= kept, f"checkpoint {kept} was lost ({status})"
    _assert_true_success(world_k, job_id, status)
    if status["state"] == "succeeded":
        logs = sorted((job_dir / "logs").glob("attempt-*.log"))
        resumed = [
            int(line.split()[-1])
            for line in logs[-1].read_text().splitlines()
            if line.startswith("resumed from")
        ]
        assert resumed and resumed[-1] >= kept, f"restarted below checkpoint {kept}: {resumed}"


def _resume_until_agent(world: World, job_id: str) -> None:
    """After the agent's death: the CLI must say so (or the job already ended), and `rgt
    resume` must bring it back."""

    def answered() -> bool:
        out = world.cli("resume", job_id, "--json")
        assert "Traceback" not in out.stderr, str(out)
        return out.code == 0 and (out.doc() or {}).get("resumed") is not None

    assert wait_until(answered, BOUND_S, step=0.5), "resume never answered"
