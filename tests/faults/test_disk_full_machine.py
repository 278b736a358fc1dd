"""A full disk on the machine at each of the agent's write points (real tmpfs as the root).

The job fills the machine's disk itself, at a chosen moment and to a chosen level, so the
fault lands on a chosen write:

- ``running``: bytes or inodes run out while the job runs (heartbeats in status.json and
  events.jsonl fail), then the job frees them and succeeds;
- ``exit``: the job leaves ``k`` pages or ``k`` inodes free and exits 0: the agent's next
  writes (status.json, events.jsonl, manifest.json, DONE, in that order) fail from the ``k``-th
  on and nobody frees anything;
- ``ckpt``: two good checkpoints, then the disk is filled to a random level and rgt.ckpt's
  third save fails (its budget check, or ENOSPC mid-file).

Each trial asserts: the job reaches a terminal state within the bound (never "running" for
ever), success only with DONE and a manifest that verifies on pull, a failure labelled
``disk_full``, and the newest good checkpoint still loads.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.faults.harness import PY, SRC, kill_processes_of, rgt, rng, wait_until

BOUND_S = 12.0  # from the job's exit to a terminal state the CLI reports
# A job that ended on a full disk waits for the user to free space (10 minutes by default)
# before it is failed as disk_full; the trials shorten that wait, not the rule.
AGENT_ENV = {"RGT_AGENT_TERMINAL_WAIT_S": "2"}
Mount = Callable[[str, int], Path]

JOB = """
import os, pathlib, sys, time
sys.path.insert(0, os.environ["FAULTS_SRC"])
import numpy
from rgt.ckpt import Checkpointer
root = pathlib.Path(os.environ["RGT_JOB_DIR"]).parents[2]
out = pathlib.Path(os.environ["RGT_OUTPUT_DIR"])
plan, resource = os.environ["FAULTS_PLAN"], os.environ["FAULTS_RESOURCE"]
left = int(os.environ["FAULTS_LEFT"])
ckpt = Checkpointer.from_env(keep_last=3)
for step in (1, 2):
    ckpt.save({"step": step, "w": numpy.full(3000, float(step), dtype=numpy.float32)}, step)
for i in range(3):
    (out / ("r%d.json" % i)).write_text('{"i": %d}' % i)
spare = root / "fill"
spare.mkdir(exist_ok=True)

def fill():
    if resource == "inodes":
        n = 0
        try:
            while True:
                (spare / str(n)).touch(); n += 1
        except OSError:
            pass
        for k in range(left):
            if n - 1 - k >= 0: (spare / str(n - 1 - k)).unlink()
        return
    fd = os.open(str(root / "filler"), os.O_WRONLY | os.O_CREAT)
    try:
        while True:
            os.write(fd, b"\\0" * 4096)
    except OSError:
        pass
    os.close(fd)
    size = os.path.getsize(root / "filler")
    os.truncate(root / "filler", max(0, size - left))

def free():
    for p in spare.iterdir(): p.unlink()
    if (root / "filler").exists(): (root / "filler").unlink()

if plan == "running":
    fill(); time.sleep(1.5); free()
elif plan == "exit":
    fill()
elif plan == "ckpt":
    fill()
    try:
        ckpt.save({"step": 3, "w": numpy.full(3000, 3.0, dtype=numpy.float32)}, 3)
    except Exception:
        free()
        raise
    free()
print("job ended", flush=True)
"""

CASES = [
    ("running", "bytes", 0),
    ("running", "inodes", 0),
    ("exit", "bytes", 0),
    ("exit", "bytes", 2 * 4096),
    ("exit", "inodes", 0),
    ("exit", "inodes", 1),
    ("exit", "inodes", 2),
    *[("ckpt", "bytes", rng("ckpt-fill", i).randrange(0, 12_000 * 2)) for i in range(4)],
]


@pytest.fixture
def machine(small_tmpfs: Mount, tmp_path: Path) -> Iterator[dict[str, Path]]:
    root = small_tmpfs("6m", 600)
    home, project = tmp_path / "home", tmp_path / "project"
    project.mkdir()
    (project / "job.py").write_text(textwrap.dedent(JOB))
    up = rgt(home, "up", "local", "--name", "box", "--root", str(root), "--json")
    assert up.code == 0, str(up)
    yield {"root": root, "home": home, "project": project}
    _stop_agents(root)


def _stop_agents(root: Path) -> None:
    """The trial's own processes only: those whose command line or environment names one of
    its job directories (an agent on a full disk may wait for space for an hour)."""
    kill_processes_of([str(p) for p in (root / ".rgt" / "jobs").glob("*")])


def _launch(m: dict[str, Path], plan: str, resource: str, left: int) -> str:
    env = {
        "FAULTS_SRC": str(SRC),
        "FAULTS_PLAN": plan,
        "FAULTS_RESOURCE": resource,
        "FAULTS_LEFT": str(left),
    }
    flags = [w for k, v in env.items() for w in ("--env", f"{k}={v}")]
    run = rgt(
        m["home"], "run", "box", "--probe-seconds", "0", "--retries", "0", "--json", *flags,
        "--", PY, "job.py", cwd=m["project"], bound=40, **AGENT_ENV,
    )  # fmt: skip
    assert run.code in (0, 1) and run.doc() and "job_id" in run.doc(), str(run)
    return str(run.doc()["job_id"])


def _terminal(m: dict[str, Path], job_id: str) -> dict[str, Any]:
    last: dict[str, Any] = {}

    def ended() -> bool:
        out = rgt(m["home"], "status", job_id, "--json")
        doc = out.doc()
        if out.code == 0 and isinstance(doc, dict) and doc.get("jobs"):
            last.update(doc["jobs"][0])
        return last.get("state") in ("succeeded", "failed", "cancelled")

    assert wait_until(ended, BOUND_S + 3, step=0.5), (
        f"no terminal state within the bound (the job is reported {last.get('state')!r}: "
        f"{last.get('reason')})"
    )
    return last


@pytest.mark.parametrize(("plan", "resource", "left"), CASES)
def test_machine_disk_full(
    machine: dict[str, Path], tmp_path: Path, plan: str, resource: str, left: int
) -> None:
    job_id = _launch(machine, plan, resource, left)
    job_dir = machine["root"] / ".rgt" / "jobs" / job_id
    status = _terminal(machine, job_id)
    _assert_checkpoint_kept(job_dir)
    if status["state"] == "succeeded":
        assert plan != "ckpt", f"a job whose save raised was reported succeeded: {status}"
        assert (job_dir / "DONE").is_file(), f"succeeded without DONE: {status}"
        out = rgt(machine["home"], "pull", job_id, "--to", str(tmp_path / "dest"), "--json")
        assert out.code == 0 and out.doc()["ok"] is True, f"success that does not verify:\n{out}"
        return
    assert plan != "running", f"space came back, yet the job failed: {status}"
    assert not (job_dir / "DONE").exists(), f"DONE beside a failed state: {status}"
    assert status.get("label") == "disk_full", (
        f"a job failed by a full disk is labelled {status.get('label')!r}: {status.get('reason')}"
    )


def _assert_checkpoint_kept(job_dir: Path) -> None:
    from rgt.ckpt import Checkpointer

    state = Checkpointer(job_dir / "ckpt", keep_last=None).load_latest()
    assert state is not None and state["step"] >= 2, "the last good checkpoint was lost"
