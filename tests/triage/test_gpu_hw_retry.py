"""A retry decision follows the label's remedy: a broken GPU is not retried on the same machine."""

from __future__ import annotations

from pathlib import Path

from rgt.agent._classify import RETRIED_ELSEWHERE, AttemptFacts, decide
from rgt.triage import default_rules
from rgt.triage.labels import RETRY_ELSEWHERE
from tests.agent.conftest import agent_pyz, make_job  # noqa: F401 - fixtures of the real agent

XID_79 = "NVRM: Xid (PCI:0000:41:00): 79, pid=1, GPU has fallen off the bus.\n"

XID_JOB = """
    import sys
    print("step 100 loss 1.02", flush=True)
    sys.stderr.write("NVRM: Xid (PCI:0000:41:00): 79, pid=1, GPU has fallen off the bus.\\n")
    sys.exit(1)
"""


def test_gpu_hw_is_not_retried_in_place_and_keeps_its_remedy() -> None:
    decision = decide(AttemptFacts(1, None, "step 9\n" + XID_79))
    assert decision.label == "gpu_hw" and not decision.retryable
    assert "another machine" in decision.remedy
    assert "not retried on this machine" in decision.cause


def test_every_rule_whose_remedy_is_another_machine_is_not_retried_in_place() -> None:
    elsewhere = {r.label for r in default_rules() if "another machine" in r.remedy}
    assert elsewhere == set(RETRIED_ELSEWHERE) == set(RETRY_ELSEWHERE)


def test_agent_ends_a_gpu_hw_attempt_as_failed_without_a_retry(make_job) -> None:  # noqa: F811
    job = make_job().write(XID_JOB)
    job.start()
    assert job.finish() == 1, job.agent_log()
    status = job.status()
    assert (status["state"], status["label"], status["attempt"]) == ("failed", "gpu_hw", 1)
    assert status["retries_left"] == 2
    ended = job.events("attempt_ended")[0]["detail"]
    assert ended["label"] == "gpu_hw" and not ended["retryable"]
    assert not job.events("retrying") and not Path(job.paths.log(2)).exists()
