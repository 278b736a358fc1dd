"""`rgt resume` on a failed job: the agent restarts it from its newest valid checkpoint (a new
attempt, the job's command and resume form), or keeps it failed and says why. Every resumed
attempt logs and records "resumed from step N (checkpoint …)"."""

from __future__ import annotations

import os
import signal
from pathlib import Path

# Saves out/step_N folders (accelerate's names) and then fails with a bug (not retried),
# unless it was told where to resume from.
FAILS_AFTER_SAVING = """
    import os, sys
    resume = sys.argv[sys.argv.index("--from") + 1] if "--from" in sys.argv else None
    start = int(resume.rsplit("_", 1)[1]) if resume else 0
    print("starting at step %d" % start, flush=True)
    for step in range(start + 1, start + 4):
        os.makedirs("out/step_%d" % step, exist_ok=True)
        open("out/step_%d/model.bin" % step, "w").write(str(step))
    if resume is None:
        raise ValueError("a bug after step 3")
"""

FAILS_WITHOUT_SAVING = """
    raise ValueError("a bug before any checkpoint")
"""


def reopen(job) -> int:
    (job.dir / "REOPEN").write_text("{}")
    job.start()
    return job.finish()


def test_a_failed_job_restarts_from_its_newest_checkpoint(make_job) -> None:
    job = make_job().write(
        FAILS_AFTER_SAVING, resume={"with": "--from {ckpt}", "ckpt": "out/step_*"}
    )
    job.start()
    assert job.finish() == 1
    assert job.status()["state"] == "failed" and job.status()["attempt"] == 1

    assert reopen(job) == 0, job.agent_log()
    status = job.status()
    assert status["state"] == "succeeded" and status["attempt"] == 2
    assert not (job.dir / "REOPEN").exists()  # one request, one restart
    [reopened] = job.events("reopened")
    assert reopened["detail"]["ckpt"].endswith("out/step_3")
    [resuming] = job.events("resuming")
    assert resuming["attempt"] == 2 and resuming["detail"]["step"] == 3
    said = resuming["detail"]["said"]
    assert said.startswith("resumed from step 3 (checkpoint ") and said.endswith("step_3)")
    second = Path(job.paths.log(2)).read_text()
    assert second.startswith("rgt-agent: " + said) and "starting at step 3" in second


def test_a_failed_job_without_a_checkpoint_stays_failed_and_says_why(make_job) -> None:
    job = make_job().write(FAILS_WITHOUT_SAVING, resume={"ckpt": "out/step_*"})
    job.start()
    assert job.finish() == 1
    assert reopen(job) == 1
    status = job.status()
    assert status["state"] == "failed" and status["attempt"] == 1
    [refused] = job.events("resume_refused")
    assert "no valid checkpoint" in refused["detail"]["reason"]
    assert "out/step_*" in refused["detail"]["reason"] and refused["severity"] == "error"
    assert not job.events("attempt_started")[1:]


def test_without_a_request_a_failed_job_stays_ended(make_job) -> None:
    job = make_job().write(
        FAILS_AFTER_SAVING, resume={"with": "--from {ckpt}", "ckpt": "out/step_*"}
    )
    job.start()
    assert job.finish() == 1
    job.start()
    assert job.finish() == 1 and job.status()["attempt"] == 1
    assert not job.events("reopened")


# Writes where Lightning's default ModelCheckpoint would, then is killed (no --ckpt given).
LIGHTNING_PLACE = """
    import os, time
    if os.environ["RGT_ATTEMPT"] == "1":
        os.makedirs("lightning_logs/version_0/checkpoints", exist_ok=True)
        open("lightning_logs/version_0/checkpoints/epoch=0-step=8.ckpt", "w").write("x")
        open(os.path.join(os.environ["RGT_OUTPUT_DIR"], "ready"), "w").write("1")
        time.sleep(600)
"""


def test_a_restart_from_zero_names_the_checkpoint_a_framework_wrote(make_job) -> None:
    job = make_job().write(LIGHTNING_PLACE)
    job.start()
    job.wait_file("outputs/ready")
    os.kill(job.trainer_pid(), signal.SIGKILL)
    assert job.finish() == 0, job.agent_log()
    [event] = job.events("restart_from_zero")
    said = event["next"]
    assert "lightning_logs/version_0/checkpoints/epoch=0-step=8.ckpt (lightning's" in said
    assert "--ckpt 'lightning_logs/version_*/checkpoints/*.ckpt'" in said
