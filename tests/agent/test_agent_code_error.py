"""The real agent on a job that dies of its own uncaught exception: `code_error`, never retried."""

from __future__ import annotations

from pathlib import Path

JOB = """
def step(batch):
    return batch["image"]


print("epoch 1", flush=True)
step({"img": 1})
"""


def test_a_code_error_fails_the_job_at_once_with_the_line(make_job) -> None:
    job = make_job().write(JOB)
    job.start()
    assert job.finish() == 1

    status = job.status()
    assert status["state"] == "failed" and status["attempt"] == 1
    assert status["label"] == "code_error"
    assert not job.events("retrying") and not Path(job.paths.log(2)).exists()
    failed = job.events("failed")[0]
    assert failed["detail"]["label"] == "code_error"
    ended = job.events("attempt_ended")[0]["detail"]
    assert not ended["retryable"]
    assert any(":3 in step: KeyError: 'image'" in line for line in ended["evidence"]), ended
