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
from rgt.jobs.status_cache import NEVER_LAUNCHED_S
from rgt.machines import register_local
from rgt.models import JobState
from rgt.state.store import Store, utcnow
from rgt.sweep._run import Launcher
from rgt.sweep._state import observe
from rgt.sweep.sweep import Sweep, load_sweep
from tests.sweep.helpers import rgt, sweep_toml, write_project


def cut_launch(store: Store, sweep: Sweep, *, failed: bool) -> Path:
    """The spec written on machine ``a``, the agent never started; ``failed``: the launcher
    saw the error and marked the record (else it was killed before it could)."""
    spec = Launcher(store, sweep).spec(sweep.cells[0], "a", "")
    store.add_job(spec)
    job = backend_for(store, "a").prepare(spec)
    if failed:
        store.update_job(spec.job_id, state=JobState.FAILED, attempts=0, ended=utcnow())
    return Path(job.spec)


def age(path: Path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then))


@pytest.fixture
def sweep(tmp_path: Path) -> Sweep:
    register_local(Store.open(), "a", tmp_path / "root 'a'")
    body = sweep_toml("cut", ["a"], lrs=[0.1], seeds=[0], extra_args=["--sleep", "0"])
    return load_sweep(write_project(tmp_path / "proj", body))


@pytest.mark.parametrize("failed", [True, False], ids=["launch error", "launcher killed"])
def test_a_cell_whose_agent_never_started_is_launched_again(
    sweep: Sweep, tmp_path: Path, failed: bool
) -> None:
    store = Store.open()
    spec_file = cut_launch(store, sweep, failed=failed)
    # An agent may still be starting: the cell waits, and is never launched twice meanwhile.
    for seconds in (0, 100):
        age(spec_file, seconds)
        [cell] = observe(store, sweep).cells
        assert (cell.state, cell.jobs[0].state) == ("queued", "queued")
    age(spec_file, NEVER_LAUNCHED_S + 1)
    [cell] = observe(store, sweep).cells
    assert (cell.state, cell.jobs[0].state) == ("missing", "absent")

    proc = rgt("sweep", "run", str(sweep.path), "--poll", "0.3", "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert [x["job_id"] for x in doc["run"]["launched"]] == [f"{sweep.cells[0].cell_id}-2"]
    assert doc["counts"]["succeeded"] == 1
    assert not (spec_file.parent / "status.json").exists()  # the cut job never ran
