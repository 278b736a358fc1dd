"""A Slurm step that never starts (real slurmctld/slurmd, real srun, real requeue).

A step holds every CPU of the job; a second srun in the same job then waits for ever ("step
creation temporarily disabled"). ``rgt.agent._step_start`` bounds that wait: the job goes back
to the queue (``scontrol requeue``) and resumes on a new allocation; where Slurm refuses the
requeue, the attempt stops and says why.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from rgt.agent._step_start import StepStart, steps
from rgt.models import JobSpec, RetryPolicy
from tests.backends.test_slurm_cluster import backend_at, ended_labels, kinds, wait_status
from tests.slurm import SlurmCluster

# The job's first srun holds every CPU the job has, so no other step can start beside it.
HOLD = 'n="${SLURM_JOB_CPUS_PER_NODE%%(*}"; srun -n1 -c "$n" sleep 300 & wait'


class Events:
    """What the agent's recorder would get."""

    def __init__(self) -> None:
        self.got: list[tuple[str, Any, str, str]] = []

    def event(self, kind: str, detail: Any, next_step: str = "", severity: str = "info") -> None:
        self.got.append((kind, detail, next_step, severity))


@pytest.fixture
def cluster(slurm_cluster: SlurmCluster, monkeypatch: pytest.MonkeyPatch) -> SlurmCluster:
    monkeypatch.setenv("RGT_AGENT_CANCEL_GRACE_S", "5")
    monkeypatch.setenv("RGT_AGENT_HEARTBEAT_S", "0.5")
    return slurm_cluster


@pytest.fixture
def held(cluster: SlurmCluster, tmp_path: Path) -> Iterator[Callable[..., str]]:
    """Starts running batch jobs whose step 0 holds all their CPUs; cancels them all at the
    end (a requeued one would otherwise come back and hold the cluster for the next test)."""
    started: list[str] = []

    def start(*flags: str) -> str:
        out = tmp_path / f"held-{len(started)}.out"
        argv = ["sbatch", "--parsable", "-o", str(out), *flags, "--wrap", HOLD]
        slurm_id = cluster.run(*argv).strip()
        started.append(slurm_id)
        cluster.wait(slurm_id, lambda j: j.state == "RUNNING", 60)
        deadline = time.monotonic() + 60
        while steps(slurm_id, _env()) != {"0"}:
            assert time.monotonic() < deadline, cluster.run("squeue", "-s", check=False)
            time.sleep(0.3)
        return slurm_id

    yield start
    for slurm_id in started:
        cluster.run("scancel", slurm_id, check=False)
    for slurm_id in started:
        cluster.wait(slurm_id, lambda j: j.state not in ("PENDING", "RUNNING", "COMPLETING"), 60)


def _env() -> dict[str, str]:
    return dict(os.environ)  # SLURM_CONF: the test cluster's


@pytest.fixture
def second_step(cluster: SlurmCluster) -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for proc in started:
        proc.kill()
        proc.wait(timeout=30)


def blocked_srun(slurm_id: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        ["srun", f"--jobid={slurm_id}", "-n1", "echo", "second"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )


def test_a_step_that_never_starts_is_bounded_and_the_job_requeued(
    cluster: SlurmCluster,
    held: Callable[..., str],
    second_step: list[subprocess.Popen[bytes]],
) -> None:
    slurm_id = held("--requeue")
    watch = StepStart(slurm_id, _env(), limit_s=4)
    assert watch.before == {"0"}  # a step already there is not the attempt's
    second_step.append(blocked_srun(slurm_id))
    rec = Events()
    deadline = time.monotonic() + 60
    while not rec.got:
        assert time.monotonic() < deadline and not watch.started, watch.__dict__
        assert second_step[0].poll() is None  # srun waits: it never gives up by itself
        assert watch.check(rec) is False  # requeued: the SIGTERM that follows stops the agent
        time.sleep(0.5)
    ((kind, detail, next_step, severity),) = rec.got
    assert (kind, severity) == ("step_blocked", "warning")
    assert detail["requeued"] is True and detail["steps_running"] == ["0"], detail
    assert detail["waited_s"] >= 4 and "resumes from its newest checkpoint" in next_step
    requeued = cluster.wait(slurm_id, lambda j: j.restarts >= 1, 60)
    assert requeued.restarts == 1, requeued
    verdict = watch.decision()
    assert (verdict.label, verdict.retryable) == ("preempted", True)
    assert any("requeued Slurm job" in line for line in verdict.evidence), verdict.evidence


def test_a_step_that_starts_is_seen_once_and_never_blocked(held: Callable[..., str]) -> None:
    slurm_id = held()
    watch = StepStart(slurm_id, _env(), limit_s=0.5)
    # --overlap: a step that may share the held CPUs, so it starts at once
    proc = subprocess.Popen(["srun", f"--jobid={slurm_id}", "--overlap", "-n1", "sleep", "20"])
    try:
        deadline = time.monotonic() + 60
        while not watch.started:
            assert time.monotonic() < deadline
            assert watch.check(Events()) is False and watch.blocked is None
            time.sleep(0.5)
    finally:
        proc.kill()
        proc.wait(timeout=30)


def test_a_job_slurm_will_not_requeue_stops_the_attempt_and_says_why(
    held: Callable[..., str], second_step: list[subprocess.Popen[bytes]]
) -> None:
    slurm_id = held("--no-requeue")
    watch = StepStart(slurm_id, _env(), limit_s=2)
    second_step.append(blocked_srun(slurm_id))
    rec = Events()
    deadline = time.monotonic() + 60
    while not watch.check(rec):
        assert time.monotonic() < deadline, watch.__dict__
        time.sleep(0.5)
    ((kind, detail, next_step, _severity),) = rec.got
    assert kind == "step_blocked" and detail["requeued"] is False, detail
    assert detail["requeue_refused"] and f"squeue -s -j {slurm_id}" in next_step
    verdict = watch.decision()
    assert (verdict.label, verdict.retryable) == ("unknown", False)
    assert "refused to requeue" in verdict.cause


# Attempt 1's task dies of SIGKILL (srun: "task 0: Killed"; no OOM evidence: a kill from
# outside, retryable); in the retry's backoff the test takes every CPU of the job with a step
# of its own, so attempt 2's srun cannot start: the agent requeues the job, and attempt 3, on
# the new allocation, trains.
COMMAND = (
    'srun -n1 sh -c \'if [ "$RGT_ATTEMPT" = 1 ]; then kill -9 $$; fi; '
    'echo "trained in attempt $RGT_ATTEMPT" > "$RGT_OUTPUT_DIR/done"\''
)


@pytest.mark.slow  # about 40 s: three attempts and a requeue
def test_the_agent_requeues_a_job_whose_step_cannot_start_and_it_resumes(
    cluster: SlurmCluster,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    second_step: list[subprocess.Popen[bytes]],
) -> None:
    monkeypatch.setenv("RGT_AGENT_STEP_START_S", "6")
    backend = backend_at(tmp_path / "durable")
    spec = JobSpec(
        job_id="blocked",
        machine="cluster",
        command=("sh", "-c", COMMAND),
        retry=RetryPolicy(max_retries=3, backoff_s=20),
    )
    job = backend.submit(spec)
    slurm_id = backend.slurm_id("blocked")
    assert slurm_id
    try:
        _wait(lambda: "retrying" in kinds(backend, "blocked"), 120)  # attempt 1 ended
        cpus = re.search(r"NumCPUs=(\d+)", cluster.run("scontrol", "show", "job", slurm_id))
        assert cpus, "no NumCPUs"
        hold = ["srun", f"--jobid={slurm_id}", "-n1", "-c", cpus.group(1), "sleep", "300"]
        second_step.append(subprocess.Popen(hold, stderr=subprocess.DEVNULL))
        _wait(lambda: bool(steps(slurm_id, _env())), 30)  # the test's step holds the CPUs
        cluster.wait(slurm_id, lambda j: j.restarts >= 1 and j.state == "PENDING", 120)
        cluster.release(slurm_id)
        status = wait_status(backend, "blocked", {"succeeded", "failed", "cancelled"}, 180)
    finally:
        cluster.run("scancel", slurm_id, check=False)
    events = backend.events("blocked")
    said = [(e["kind"], e["detail"].get("label"), e["detail"].get("cause")) for e in events]
    assert status["state"] == "succeeded", (status, said)
    (blocked,) = [e for e in events if e["kind"] == "step_blocked"]
    assert blocked["detail"]["requeued"] is True and blocked["detail"]["waited_s"] >= 6
    ended = [e["detail"] for e in events if e["kind"] == "attempt_ended"]
    assert [e["label"] for e in ended] == ended_labels(backend, "blocked")
    assert ended[1]["label"] == "preempted" and "never started" in ended[1]["cause"], ended[1]
    assert len(ended) == 3 and ended[2]["label"] is None
    assert (ended[0]["label"], ended[0]["retryable"]) == ("preempted", True), ended[0]
    assert ended[0]["evidence"][0].startswith("srun: first failing rank 0, killed by SIGKILL on ")
    done = Path(job.root) / "outputs" / "done"
    assert done.read_text().strip() == "trained in attempt 3"


def _wait(done: Any, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"not so after {timeout} s"
        time.sleep(0.5)
