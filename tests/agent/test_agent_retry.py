"""Retry only for retryable causes: external kills and host restarts yes, bugs never."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.agent.conftest import process_gone
from tests.cgroups import in_cgroup, memory_cgroup, remove_cgroup

# Attempt 1 checkpoints step 5 and waits to be killed; a later attempt resumes from it.
RESUMABLE_JOB = """
    import os, time
    ckpt = os.path.join(os.environ["RGT_CKPT_DIR"], "step.txt")
    out = os.environ["RGT_OUTPUT_DIR"]
    if os.path.exists(ckpt):
        step = int(open(ckpt).read())
        open(os.path.join(out, "resumed-from"), "w").write(str(step))
    else:
        open(ckpt, "w").write("5")
        open(os.path.join(out, "ready"), "w").write(str(os.getpid()))
        time.sleep(600)
"""


def test_external_kill_9_is_retried_and_resumes(make_job) -> None:
    job = make_job().write(RESUMABLE_JOB)
    job.start()
    job.wait_file("outputs/ready")
    pid = job.trainer_pid()
    os.kill(pid, signal.SIGKILL)  # what a spot reclaim or a user's kill -9 looks like
    assert job.finish() == 0, job.agent_log()

    status = job.status()
    assert status["state"] == "succeeded" and status["attempt"] == 2
    assert status["retries_left"] == 1 and status["label"] is None  # a success: no label
    assert (job.dir / "outputs" / "resumed-from").read_text() == "5"
    ended = job.events("attempt_ended")
    assert ended[0]["detail"]["signal"] == signal.SIGKILL
    assert ended[0]["detail"]["label"] == "preempted" and ended[0]["detail"]["retryable"]
    assert [e["attempt"] for e in job.events("retrying")] == [1]
    assert Path(job.paths.log(1)).exists() and Path(job.paths.log(2)).exists()


def test_python_exception_is_not_retried(make_job) -> None:
    job = make_job().write("import os\nimport flash_attn_that_is_not_installed\n")
    job.start()
    assert job.finish() == 1

    status = job.status()
    assert status["state"] == "failed" and status["attempt"] == 1 and status["exit_code"] == 1
    assert status["label"] == "import_error"  # from the shared triage rules
    assert status["retries_left"] == 2
    assert not job.events("retrying") and not Path(job.paths.log(2)).exists()
    assert not Path(job.paths.done).exists()
    assert json.loads(Path(job.paths.manifest).read_text())["state"] == "failed"
    failed = job.events("failed")[0]
    assert failed["next"] and failed["detail"]["label"] == "import_error"


def test_self_kill_looks_external_so_the_retry_budget_bounds_it(make_job) -> None:
    # From outside, a job that SIGKILLs itself is indistinguishable from a preemption (no
    # cgroup OOM, a signal the agent did not send). The honest bound is the retry budget.
    job = make_job().write("import os\nos.kill(os.getpid(), 9)\n")
    job.start()
    assert job.finish() == 1

    status = job.status()
    assert status["state"] == "failed" and status["attempt"] == 3 and status["retries_left"] == 0
    assert status["label"] == "preempted" and "retry budget exhausted" in status["reason"]
    assert len(job.events("retrying")) == 2
    assert job.events("failed")[0]["next"]


CANCELLABLE_JOB = """
    import os, signal, subprocess, sys, time
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a job that ignores SIGTERM: needs SIGKILL
    worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    pid_file = os.path.join(os.environ["RGT_OUTPUT_DIR"], "worker.pid")
    open(pid_file + ".part", "w").write(str(worker.pid))
    os.rename(pid_file + ".part", pid_file)  # the test never reads a half-written pid
    time.sleep(600)
"""


@pytest.mark.slow  # > 1 s on two cores
def test_cancel_stops_the_whole_process_group_and_is_not_retried(make_job) -> None:
    job = make_job().write(CANCELLABLE_JOB)
    job.start()
    worker_pid = int(job.wait_file("outputs/worker.pid").read_text())
    job_pid = job.trainer_pid()

    result = job.agent_cmd("cancel")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["state"] == "cancelled"
    # The CLI and the supervisor both stop the group, and either may be the one whose grace
    # runs out first and sends SIGKILL; the job ignores SIGTERM, so SIGKILL is what ended it.
    assert report["signals_sent"][:1] == [signal.SIGTERM]
    assert job.finish() == 1
    assert process_gone(job_pid) and process_gone(worker_pid)
    assert job.events("attempt_ended")[-1]["detail"]["signal"] == signal.SIGKILL
    status = job.status()
    assert status["state"] == "cancelled" and status["attempt"] == 1
    assert not job.events("retrying") and not Path(job.paths.done).exists()
    assert json.loads(Path(job.paths.manifest).read_text())["state"] == "cancelled"


def test_cancel_without_a_live_agent_records_it(make_job) -> None:
    job = make_job().write(RESUMABLE_JOB)
    agent = job.start()
    job.wait_file("outputs/ready")
    job_pid = job.trainer_pid()
    os.killpg(agent.pid, signal.SIGKILL)  # the agent is gone; its job keeps running
    agent.wait()
    assert not process_gone(job_pid)

    report = json.loads(job.agent_cmd("cancel").stdout)
    assert report["state"] == "cancelled" and report["signals_sent"]
    assert process_gone(job_pid)
    assert job.status()["state"] == "cancelled"


def test_host_restart_counts_as_an_interrupted_attempt(make_job, tmp_path: Path) -> None:
    boot = tmp_path / "boot_id"
    boot.write_text("boot-A\n")
    job = make_job().write(RESUMABLE_JOB)
    agent = job.start(RGT_AGENT_BOOT_ID_FILE=str(boot))
    job.wait_file("outputs/ready")
    # The restart: every process is gone without a word, then the kernel has a new boot id.
    job_pid = job.trainer_pid()
    os.killpg(agent.pid, signal.SIGKILL)
    os.killpg(job_pid, signal.SIGKILL)
    agent.wait()
    boot.write_text("boot-B\n")

    job.start(RGT_AGENT_BOOT_ID_FILE=str(boot))
    assert job.finish() == 0, job.agent_log()
    status = job.status()
    assert status["state"] == "succeeded" and status["attempt"] == 2
    assert status["boot_id"] == "boot-B" and status["retries_left"] == 1
    restart = job.events("host_restart_detected")[0]["detail"]
    assert restart == {"boot_id_before": "boot-A", "boot_id_now": "boot-B"}
    first_end = job.events("attempt_ended")[0]
    assert first_end["attempt"] == 1 and first_end["detail"]["label"] == "preempted"
    assert (job.dir / "outputs" / "resumed-from").read_text() == "5"


def test_dead_agent_with_orphaned_job_resumes_without_two_writers(make_job) -> None:
    job = make_job().write(RESUMABLE_JOB)
    agent = job.start()
    job.wait_file("outputs/ready")
    orphan = job.trainer_pid()
    agent.send_signal(signal.SIGKILL)  # only the agent dies; the job runs on in its session
    agent.wait()
    assert not process_gone(orphan)

    job.start()
    assert job.finish() == 0, job.agent_log()
    assert process_gone(orphan)
    status = job.status()
    assert status["state"] == "succeeded" and status["attempt"] == 2
    evidence = job.events("attempt_ended")[0]["detail"]["evidence"]
    assert any("still running" in line for line in evidence)


def test_agent_sigterm_stops_the_job_and_leaves_it_resumable(make_job) -> None:
    job = make_job().write(RESUMABLE_JOB)
    agent = job.start()
    job.wait_file("outputs/ready")
    job_pid = job.trainer_pid()
    agent.send_signal(signal.SIGTERM)  # e.g. Slurm's --signal before a preemption
    assert agent.wait(timeout=30) == 1
    assert process_gone(job_pid)
    assert job.status()["state"] == "retrying" and job.events("agent_stopped")

    job.start()
    assert job.finish() == 0
    assert job.status()["attempt"] == 2


def test_a_failed_job_is_not_rerun_by_a_new_agent(make_job) -> None:
    job = make_job().write("raise SystemExit(3)\n")
    job.start()
    assert job.finish() == 1
    job.start()
    assert job.finish() == 1
    assert len(job.events("attempt_started")) == 1


def test_cgroup_oom_kill_is_host_oom_and_not_retried(make_job, tmp_path: Path) -> None:
    cgroup = memory_cgroup(tmp_path, 256 << 20)
    job = make_job().write(
        "import time\nblocks = []\n"
        "while True:\n    blocks.append(b'x' * (32 << 20))\n    time.sleep(0.01)\n"
    )
    # The agent is moved into a small memory cgroup before it starts; the job inherits it.
    argv = in_cgroup(cgroup, [sys.executable, str(job.pyz), "run", str(job.dir)])
    try:
        agent = subprocess.Popen(argv, env=job.env(), start_new_session=True)
        assert agent.wait(timeout=120) == 1, job.agent_log()
    finally:
        remove_cgroup(cgroup)
    status = job.status()
    assert status["label"] == "host_oom" and status["state"] == "failed"
    assert status["signal"] == signal.SIGKILL and status["attempt"] == 1
    assert "oom_kill" in " ".join(job.events("attempt_ended")[0]["detail"]["evidence"])


USR1_JOB = """
    import os, signal, sys, time
    out = os.environ["RGT_OUTPUT_DIR"]
    if os.environ.get("HANDLE_USR1") == "1":
        def last_checkpoint(signum, frame):
            open(os.path.join(os.environ["RGT_CKPT_DIR"], "last.pt"), "w").write("saved")
            sys.exit(0)
        signal.signal(signal.SIGUSR1, last_checkpoint)
    if os.environ["RGT_ATTEMPT"] == "2":
        sys.exit(0)
    open(os.path.join(out, "ready"), "w").close()
    time.sleep(600)
"""


def test_sigusr1_to_the_agent_reaches_the_job_for_a_last_checkpoint(make_job) -> None:
    job = make_job().write(USR1_JOB)
    agent = job.start(HANDLE_USR1="1")
    job.wait_file("outputs/ready")
    agent.send_signal(signal.SIGUSR1)  # Slurm --signal=B:USR1@grace, sent to the agent only
    assert job.finish() == 0, job.agent_log()
    assert (job.dir / "ckpt" / "last.pt").read_text() == "saved"
    assert job.events("checkpoint_requested")[0]["detail"]["delivered"] is True
    assert job.status()["attempt"] == 1


def test_a_job_killed_by_the_forwarded_sigusr1_is_a_preemption(make_job) -> None:
    job = make_job().write(USR1_JOB)
    agent = job.start()
    job.wait_file("outputs/ready")
    agent.send_signal(signal.SIGUSR1)  # no handler in the job: the default action kills it
    assert job.finish() == 0, job.agent_log()
    first = job.events("attempt_ended")[0]["detail"]
    assert first["signal"] == signal.SIGUSR1 and first["label"] == "preempted"
    assert job.status()["attempt"] == 2


def test_a_queued_status_written_by_the_cli_keeps_the_full_retry_budget(make_job) -> None:
    job = make_job().write(RESUMABLE_JOB)
    Path(job.paths.status).write_text('{"job_id": "job-1", "state": "queued"}')
    job.start()
    job.wait_file("outputs/ready")
    os.kill(job.trainer_pid(), signal.SIGKILL)
    assert job.finish() == 0, job.agent_log()
    assert job.status()["attempt"] == 2 and job.status()["retries_left"] == 1
