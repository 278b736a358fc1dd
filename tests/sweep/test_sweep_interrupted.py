"""A launch cut between writing the job's spec and starting its agent (the machine's sshd died
in between, or the launching rgt process was killed): the job's directory is on the machine and
no agent ever ran it. Once the machine answers, the sweep sees the cell as never started and
launches it again, instead of waiting forever for a job that nothing will run."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from rgt.backends import backend_for
from rgt.lifecycle.machines import register_local
from rgt.models import JobState
from rgt.state.store import Store, utcnow
from rgt.status.cache import NEVER_LAUNCHED_S
from rgt.sweep._run import Launcher
from rgt.sweep._state import observe
from rgt.sweep.sweep import Sweep, load_sweep
from tests.sweep.helpers import rgt, sweep_toml, write_project


def cut_launch(store: Store, sweep: Sweep, *, failed: bool, spec_written: bool = True) -> Path:
    """The job's directory made on machine ``a``, the agent never started; returns the path
    whose age says when the launch last wrote. ``failed``: the launcher saw the error and
    marked the record (else it was killed before it could); ``spec_written``: the cut came
    after the spec was written (else between making the directory and writing it)."""
    spec = Launcher(store, sweep).spec(sweep.cells[0], "a", "")
    store.add_job(spec)
    backend = backend_for(store, "a")
    if spec_written:
        written = Path(backend.prepare(spec).spec)
    else:
        job = backend.job_paths(spec.job_id)
        backend.transport.mkdir(job.logs_dir)
        written = Path(job.root)
    if failed:
        store.update_job(spec.job_id, state=JobState.FAILED, attempts=0, ended=utcnow())
    return written


def age(path: Path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then))


@pytest.fixture
def sweep(tmp_path: Path) -> Sweep:
    register_local(Store.open(), "a", tmp_path / "root 'a'")
    body = sweep_toml("cut", ["a"], lrs=[0.1], seeds=[0], extra_args=["--sleep", "0"])
    return load_sweep(write_project(tmp_path / "proj", body))


@pytest.mark.parametrize(
    ("failed", "spec_written"),
    [(True, True), (False, True), (True, False), (False, False)],
    ids=["launch error", "launcher killed", "cut before the spec", "killed before the spec"],
)
def test_a_cell_whose_agent_never_started_is_launched_again(
    sweep: Sweep, tmp_path: Path, failed: bool, spec_written: bool
) -> None:
    store = Store.open()
    last_written = cut_launch(store, sweep, failed=failed, spec_written=spec_written)
    # An agent may still be starting: the cell waits, and is never launched twice meanwhile.
    for seconds in (0, 100):
        age(last_written, seconds)
        [cell] = observe(store, sweep).cells
        assert (cell.state, cell.jobs[0].state) == ("queued", "queued")
    age(last_written, NEVER_LAUNCHED_S + 1)
    [cell] = observe(store, sweep).cells
    assert (cell.state, cell.jobs[0].state) == ("missing", "absent")

    proc = rgt("sweep", "run", str(sweep.path), "--poll", "0.3", "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert [x["job_id"] for x in doc["run"]["launched"]] == [f"{sweep.cells[0].cell_id}-2"]
    assert doc["counts"]["succeeded"] == 1
    job_dir = last_written.parent if spec_written else last_written
    assert not (job_dir / "status.json").exists()  # the cut job never ran


@pytest.mark.parametrize("left", ["events, no status.json", "status.json says running"])
def test_a_cell_in_doubt_on_a_machine_that_answers_does_not_keep_the_run_waiting(
    sweep: Sweep, left: str
) -> None:
    """An agent ran the job and is gone without recording an end (status.json missing, or
    still saying running): the cell is in doubt and never launched again, but nothing the
    run waits for will change it, so `rgt sweep run` returns with the cell shown in doubt
    instead of polling forever."""
    store = Store.open()
    spec_file = cut_launch(store, sweep, failed=False)
    event = {"kind": "attempt_started", "time": utcnow(), "attempt": 1}
    (spec_file.parent / "events.jsonl").write_text(json.dumps(event) + "\n")
    if left == "status.json says running":
        job_id = spec_file.parent.name
        status = {"job_id": job_id, "state": "running", "attempt": 1, "heartbeat": utcnow()}
        (spec_file.parent / "status.json").write_text(json.dumps(status))
    age(spec_file, NEVER_LAUNCHED_S + 1)
    [cell] = observe(store, sweep).cells
    assert (cell.state, cell.jobs[0].state) == ("unreachable", "unreachable")
    if left == "status.json says running":
        assert cell.jobs[0].label == "heartbeat_lost" and "rgt resume" in str(cell.jobs[0].reason)

    proc = rgt("sweep", "run", str(sweep.path), "--poll", "0.3", "--json", timeout=60)
    assert proc.returncode == 1, proc.stderr  # a cell is not finished
    doc = json.loads(proc.stdout)
    assert doc["run"]["launched"] == [] and doc["counts"]["unreachable"] == 1
    assert doc["unreachable"] == {}  # the machine answered
