"""The Slurm backend on a real single-node Slurm (``tests/slurm.py``).

Every test submits through ``SlurmBackend`` (rendered script, real ``sbatch``), lets Slurm do
what it does (signals, requeue, cancel), and reads the answer back through the backend's merged
status and the agent's own files. Time limits are real: Slurm's granularity is a minute, and
with ``--signal=B:USR1@50`` on ``--time=1`` the warning comes well inside that minute.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rgt.backends.slurm import SlurmBackend
from rgt.models import JobSpec, JobState, Machine
from rgt.resources import Resources
from rgt.status.read import read
from tests.backends.conformance import status_doc
from tests.slurm import SlurmCluster

DEMO = Path(__file__).resolve().parents[2] / "examples" / "train_demo.py"
PY = sys.executable

# A job that resumes from its own checkpoint file: counts to TARGET, one count per 0.1 s,
# writing the count atomically after each; a restart continues from the saved count.
COUNTER = r"""
import os, sys, time
target = int(sys.argv[1])
path = os.path.join(os.environ["RGT_CKPT_DIR"], "count")
count = int(open(path).read()) if os.path.exists(path) else 0
print("attempt", os.environ["RGT_ATTEMPT"], "starts at", count, flush=True)
while count < target:
    time.sleep(0.1)
    count += 1
    with open(path + ".tmp", "w") as handle:
        handle.write(str(count))
    os.replace(path + ".tmp", path)
print("finished at", count, flush=True)
"""


@pytest.fixture
def cluster(slurm_cluster: SlurmCluster, monkeypatch: pytest.MonkeyPatch) -> SlurmCluster:
    # Jobs inherit the submitter's environment (sbatch --export=ALL): short agent clocks.
    monkeypatch.setenv("RGT_AGENT_CANCEL_GRACE_S", "5")
    monkeypatch.setenv("RGT_AGENT_HEARTBEAT_S", "0.5")
    return slurm_cluster


def backend_at(root: Path, grace_s: int = 50) -> SlurmBackend:
    root.mkdir(parents=True, exist_ok=True)
    machine = Machine(
        name="cluster",
        backend="slurm",
        profile="slurm",
        connection={"slurm": {"grace_s": grace_s}},
        durable_root=str(root),
    )
    return SlurmBackend(machine)


def wait_status(backend: SlurmBackend, job_id: str, states: set[str], timeout: float = 240) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        status = status_doc(backend, job_id)
        if status["state"] in states:
            return status
        if time.monotonic() > deadline:
            raise AssertionError(f"{job_id} still {status['state']}: {json.dumps(status)}")
        time.sleep(0.5)


def kinds(backend: SlurmBackend, job_id: str) -> list[str]:
    return [str(event["kind"]) for event in backend.events(job_id)]


def ended_labels(backend: SlurmBackend, job_id: str) -> list[Any]:
    events = backend.events(job_id)
    return [e["detail"].get("label") for e in events if e["kind"] == "attempt_ended"]


@pytest.fixture
def reference_run(tmp_path: Path) -> Iterator[Path]:
    """The same training, uninterrupted, outside Slurm, running meanwhile."""
    out = tmp_path / "reference"
    env = dict(os.environ, RGT_CKPT_DIR=str(out / "ckpt"), RGT_OUTPUT_DIR=str(out / "outputs"))
    proc = subprocess.Popen([PY, str(DEMO), *DEMO_ARGS], env=env, stdout=subprocess.DEVNULL)
    yield out
    proc.kill()


DEMO_ARGS = ("--steps", "200", "--ckpt-every", "20", "--seed", "3")


def test_time_limit_warning_requeues_and_resumes(cluster: SlurmCluster, tmp_path: Path) -> None:
    """A real time limit: ``--time=1`` with the warning at 59 s before it, so Slurm's own timer
    (it looks every ~30 s) sends USR1 within the first half minute of the 45 s job."""
    backend = backend_at(tmp_path / "durable", grace_s=59)
    spec = JobSpec(job_id="timelimit", machine="cluster", command=(PY, "-c", COUNTER, "450"))
    job = backend.submit(spec, resources=Resources(timeout_min=1))
    slurm_id = backend.slurm_id("timelimit")
    assert slurm_id
    requeued = cluster.wait(slurm_id, lambda j: j.restarts >= 1 and j.state == "PENDING", 120)
    assert status_doc(backend, "timelimit")["state"] == "retrying"
    cluster.release(slurm_id, TimeLimit="15")
    final = wait_status(backend, "timelimit", {"succeeded", "failed", "cancelled"})
    why = (final.get("reason"), final.get("label"), kinds(backend, "timelimit"), cluster.logs())
    assert final["state"] == "succeeded", why
    assert final["attempts"] == requeued.restarts + 1 == 2
    assert "checkpoint_requested" in kinds(backend, "timelimit")
    assert ended_labels(backend, "timelimit")[0] == "preempted"
    log = Path(job.log(int(final["attempt"]))).read_text()
    assert int(log.split("starts at")[1].split()[0]) > 0, "the requeued run started from zero"
    assert "time limit near" in Path(job.root, "logs", "slurm.out").read_text()


def test_warned_training_resumes_bit_identical(
    cluster: SlurmCluster, tmp_path: Path, reference_run: Path
) -> None:
    """train_demo under Slurm gets the time-limit warning the way Slurm delivers it (USR1 to
    the batch shell only: ``scancel --batch --signal=USR1``) after a few checkpoints, is
    requeued, resumes, and ends with the weights of the uninterrupted reference run."""
    backend = backend_at(tmp_path / "durable")
    spec = JobSpec(job_id="train", machine="cluster", command=(PY, str(DEMO), *DEMO_ARGS))
    job = backend.submit(spec)
    slurm_id = backend.slurm_id("train")
    assert slurm_id
    _wait_for(lambda: len(list(Path(job.ckpt_dir).glob("*.json"))) >= 2, 240)
    cluster.run("scancel", "--batch", "--signal=USR1", slurm_id)
    cluster.wait(slurm_id, lambda j: j.restarts == 1 and j.state == "PENDING", 120)
    cluster.release(slurm_id)
    final = wait_status(backend, "train", {"succeeded", "failed", "cancelled"}, 400)
    assert final["state"] == "succeeded", final
    assert final["attempts"] == 2 and ended_labels(backend, "train")[0] == "preempted"
    last_log = Path(job.log(int(final["attempt"]))).read_text()
    first_step = next(line for line in last_log.splitlines() if line.startswith("step "))
    assert int(first_step.split()[1]) > 20, "the requeued run did not resume"
    _wait_file(reference_run / "outputs" / "results.json", 400)
    assert _digest(Path(job.ckpt_dir)) == _digest(reference_run / "ckpt")
    assert _sha(Path(job.output_dir) / "model.safetensors") == _sha(
        reference_run / "outputs" / "model.safetensors"
    )


def test_scontrol_requeue_mid_run_is_a_preemption(cluster: SlurmCluster, tmp_path: Path) -> None:
    backend = backend_at(tmp_path / "it's a $(dir) ü")
    spec = JobSpec(job_id="preempt", machine="cluster", command=(PY, "-c", COUNTER, "60"))
    job = backend.submit(spec)
    slurm_id = backend.slurm_id("preempt")
    assert slurm_id
    count = Path(job.ckpt_dir) / "count"
    _wait_for(lambda: count.exists() and int(count.read_text() or 0) >= 10, 120)
    cluster.run("scontrol", "requeue", slurm_id)
    cluster.wait(slurm_id, lambda j: j.state == "PENDING" and j.restarts == 1)
    cluster.release(slurm_id)
    final = wait_status(backend, "preempt", {"succeeded", "failed", "cancelled"})
    assert final["state"] == "succeeded", final
    assert final["attempts"] == 2 and final["slurm"]["restart_count"] == 1
    assert ended_labels(backend, "preempt") == ["preempted", None]
    resumed_at = int(Path(job.log(2)).read_text().split("starts at")[1].split()[0])
    assert resumed_at >= 10
    assert count.read_text() == "60"


def test_array_runs_each_cell_in_its_own_job_dir(cluster: SlurmCluster, tmp_path: Path) -> None:
    backend = backend_at(tmp_path / "sweep root")
    write = "import os,sys; open(os.environ['RGT_OUTPUT_DIR'] + '/cell','w').write(sys.argv[1])"
    specs = [
        JobSpec(
            job_id=f"cell-{i}",
            machine="cluster",
            command=(PY, "-c", write, str(i)),
            artifacts=("outputs/cell",),
        )
        for i in range(3)
    ]
    array_id = backend.submit_many(specs, limit=2)
    for i, spec in enumerate(specs):
        assert backend.slurm_id(spec.job_id) == f"{array_id}_{i}"
    for i, spec in enumerate(specs):
        status = wait_status(backend, spec.job_id, {"succeeded", "failed", "cancelled"})
        assert status["state"] == "succeeded", status
        assert status["slurm"]["job_id"] == f"{array_id}_{i}"
        assert (Path(backend.job_paths(spec.job_id).output_dir) / "cell").read_text() == str(i)
        manifest = backend.manifest(spec.job_id)
        assert manifest and [f["path"] for f in manifest[0]["files"]] == ["outputs/cell"]


def test_scancel_shows_as_cancelled_not_failed(cluster: SlurmCluster, tmp_path: Path) -> None:
    backend = backend_at(tmp_path / "durable")
    spec = JobSpec(job_id="doomed", machine="cluster", command=(PY, "-c", COUNTER, "100000"))
    job = backend.submit(spec)
    slurm_id = backend.slurm_id("doomed")
    assert slurm_id
    wait_status(backend, "doomed", {"running"})
    cluster.run("scancel", slurm_id)
    cluster.wait(slurm_id, lambda j: j.state == "CANCELLED")
    _wait_for(lambda: not status_doc(backend, "doomed")["agent_alive"], 60)
    status = status_doc(backend, "doomed")
    assert status["state"] == "cancelled" and status["slurm"]["state"] == "CANCELLED"
    # The backend's read changes nothing: it says the end is not recorded, and leaves it so.
    assert status["unrecorded_end"] is True
    assert json.loads(Path(job.status).read_text())["state"] != "cancelled"
    # The status path records it, with the agent's own code: it outlives Slurm's memory of
    # the job (``rgt.status.read``, what `rgt status`, `watch` and the gate read through).
    assert read(backend, ["doomed"]).job("doomed").state is JobState.CANCELLED
    recorded = json.loads(Path(job.status).read_text())
    assert recorded["state"] == "cancelled"
    assert status_doc(backend, "doomed")["state"] == "cancelled"
    assert "unrecorded_end" not in status_doc(backend, "doomed")


# A second step while the first holds every CPU of the allocation: srun waits for it. The Slurm
# of the test cluster writes its "step creation temporarily disabled, retrying" only when srun
# ends, so while it waits the log is silent.
BLOCKED_STEP = (
    'n="${SLURM_JOB_CPUS_PER_NODE%%(*}"; srun -n1 -c "$n" sleep 60 & sleep 2; '
    "srun -n1 echo second-step; wait"
)


def test_a_step_that_cannot_start_is_a_stall_that_says_so(
    cluster: SlurmCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job whose srun waits for busy nodes is reported stalled within the bound, with what
    to look at on the cluster (real srun, real step scheduling)."""
    monkeypatch.setenv("RGT_WATCH_STALL_S", "8")
    backend = backend_at(tmp_path / "durable")
    spec = JobSpec(job_id="blocked", machine="cluster", command=("sh", "-c", BLOCKED_STEP))
    job = backend.submit(spec)
    slurm_id = backend.slurm_id("blocked")
    assert slurm_id
    try:
        _wait_for(lambda: "log_stalled" in kinds(backend, "blocked"), 120)
    finally:
        events = backend.events("blocked")
        cluster.run("scancel", slurm_id, check=False)
    stalled = next(e for e in events if e["kind"] == "log_stalled")
    assert stalled["detail"]["quiet_s"] >= 8 and "squeue -s" in stalled["next"], stalled
    _wait_for(lambda: "disabled, retrying" in Path(job.log(1)).read_text(), 60)


def test_a_real_bug_fails_once_and_is_not_requeued(cluster: SlurmCluster, tmp_path: Path) -> None:
    backend = backend_at(tmp_path / "durable")
    spec = JobSpec(job_id="buggy", machine="cluster", command=(PY, "-c", "import torchvison_typo"))
    backend.submit(spec)
    slurm_id = backend.slurm_id("buggy")
    assert slurm_id
    status = wait_status(backend, "buggy", {"succeeded", "failed", "cancelled"})
    assert status["state"] == "failed" and status["label"] == "import_error", status
    job = cluster.wait(slurm_id, lambda j: j.state not in ("PENDING", "RUNNING", "COMPLETING"))
    assert job.state == "FAILED" and job.restarts == 0
    assert status["attempts"] == 1 and ended_labels(backend, "buggy") == ["import_error"]


def test_cancel_through_rgt_removes_a_queued_job(cluster: SlurmCluster, tmp_path: Path) -> None:
    backend = backend_at(tmp_path / "durable")
    spec = JobSpec(job_id="queued", machine="cluster", command=(PY, "-c", "print(1)"))
    # A DOWN partition queues jobs but allocates nothing: the job waits, no agent starts.
    cluster.run("scontrol", "update", "PartitionName=debug", "State=DOWN")
    try:
        backend.submit(spec)
        slurm_id = backend.slurm_id("queued")
        assert slurm_id
        assert status_doc(backend, "queued")["state"] == "queued"
        result = backend.cancel("queued")
    finally:
        cluster.run("scontrol", "update", "PartitionName=debug", "State=UP")
    assert result["state"] == "cancelled"
    assert cluster.job(slurm_id).state == "CANCELLED"
    assert status_doc(backend, "queued")["state"] == "cancelled"


def _digest(ckpt_dir: Path) -> str:
    from rgt.ckpt import Checkpointer

    info = Checkpointer(ckpt_dir).latest_info()
    assert info is not None, f"no checkpoint in {ckpt_dir}"
    return str(info.state_digest)


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _wait_for(predicate: Any, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)


def _wait_file(path: Path, timeout: float) -> None:
    _wait_for(path.exists, timeout)
