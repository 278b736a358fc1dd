"""`rgt run … --dry-run`: what would start, where, and p50/p90 duration and cost from this
command's history on this machine type, or "no history"; nothing starts, no meter runs."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from rgt.autostop.forecast import forecast
from rgt.models import JobSpec, JobState
from rgt.state.store import Store
from tests.autostop.helpers import project, run_job, wait_ended
from tests.clirun import ok, rgt


@pytest.fixture
def box(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    assert rgt("up", "local", "--name", "box", "--root", str(root)).returncode == 0
    return root


@pytest.mark.slow
def test_no_history_and_nothing_starts(box: Path, tmp_path: Path) -> None:
    folder = project(tmp_path, "print('hi')\n")
    doc = ok(rgt("run", "box", "--dry-run", "--json", "--", "python3", "train.py", cwd=folder))
    assert doc["started"] is False and doc["runs"] == 0 and doc["p50_s"] is None
    assert doc["note"].startswith("no history") and doc["machine"] == "box"
    human = rgt("run", "box", "--dry-run", "--", "python3", "train.py", cwd=folder)
    assert "nothing started" in human.stdout and "no history" in human.stdout
    assert not (box / ".rgt" / "jobs").exists()  # no job directory: nothing was launched
    assert json.loads(rgt("status", "--json").stdout)["jobs"] == []


def _seed(store: Store, machine: str, command: tuple[str, ...], minutes: list[int]) -> None:
    for index, length in enumerate(minutes):
        spec = JobSpec(
            job_id=f"{machine}-{command[1][:-3]}-{index}",
            machine=machine,
            command=command,
            created="2026-12-01T10:00:00Z",
        )
        store.add_job(spec)
        ended = f"2026-12-01T{10 + length // 60:02d}:{length % 60:02d}:00Z"
        store.update_job(spec.job_id, state=JobState.SUCCEEDED, attempts=1, ended=ended)


@pytest.mark.slow
def test_p50_p90_and_cost_from_the_history_of_this_command_on_this_type(
    tmp_path: Path, box: Path
) -> None:
    store = Store.open()
    command = ("python3", "train.py", "--lr", "0.1")
    _seed(store, "box", command, [10, 20, 30, 40, 50, 60, 70, 80, 90, 100])
    _seed(store, "box", ("python3", "other.py"), [500])  # another command: not counted
    failed = JobSpec(
        job_id="box-failed", machine="box", command=command, created="2026-12-01T10:00:00Z"
    )
    store.add_job(failed)
    store.update_job(failed.job_id, state=JobState.FAILED, attempts=1, ended="2026-12-01T18:00:00Z")
    result = forecast(store, "box", command)
    assert result.runs == 10
    assert (result.p50_s, result.p90_s) == (50 * 60, 90 * 60)  # nearest rank, a real run each
    assert result.cost_p50 is None  # the local machine has no price: no invented cost
    store.add_machine(replace(store.machine("box"), price_per_hour=2.0))
    priced = forecast(store, "box", command)
    assert (priced.cost_p50, priced.cost_p90) == (round(2.0 * 50 / 60, 4), 3.0)


@pytest.mark.slow
def test_real_runs_become_the_history(box: Path, tmp_path: Path) -> None:
    folder = project(tmp_path, "import time\ntime.sleep(1)\n")
    for _ in range(2):
        assert wait_ended("box", run_job("box", folder, "python3", "train.py")) == "succeeded"
    doc = ok(rgt("run", "box", "--dry-run", "--json", "--", "python3", "train.py", cwd=folder))
    assert doc["runs"] == 2 and 1 <= doc["p50_s"] <= doc["p90_s"] < 60
    human = rgt("run", "box", "--dry-run", "--", "python3", "train.py", cwd=folder).stdout
    assert "expected duration: p50" in human
