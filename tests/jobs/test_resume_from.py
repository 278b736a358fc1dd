"""A relaunched job (a sweep cell's next job) resumes from its predecessor's checkpoints."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from rgt.backends import backend_for
from rgt.ckpt import Checkpointer
from rgt.jobs.launch import LaunchOptions, launch, wait
from rgt.lifecycle.machines import register_local
from rgt.state.store import Store

SCRIPT = """
import sys
from rgt.ckpt import Checkpointer
ckpt = Checkpointer.from_env(every_steps=1)
state = ckpt.load_latest()
step = state["step"] if state else 0
print("resumed from step", step, flush=True)
while step < 5:
    step += 1
    ckpt.save({"step": step}, step=step)
    if step == 3 and state is None:
        sys.exit("a failure after the third checkpoint")
"""


@pytest.mark.slow  # > 1 s on two cores
def test_resume_from_an_earlier_job(tmp_path: Path) -> None:
    store = Store.open()
    register_local(store, "box", tmp_path / "root")
    project = tmp_path / "proj"
    project.mkdir()
    (project / "train.py").write_text(SCRIPT)
    command = (sys.executable, "train.py")
    first = launch(store, "box", LaunchOptions(command=command, cwd=project, job_id="cell-1"))
    assert wait(store, first.job_id, poll=0.2)["state"] == "failed"
    second = launch(
        store,
        "box",
        LaunchOptions(command=command, cwd=project, job_id="cell-2", resume_from="cell-1"),
    )
    assert wait(store, second.job_id, poll=0.2)["state"] == "succeeded"
    backend = backend_for(store, "box")
    assert b"resumed from step 3" in backend.log("cell-2", 1)
    info = Checkpointer(backend.job_paths("cell-2").ckpt_dir).latest_info()
    assert info is not None and info.step == 5
