"""A launcher's summary names the first failing rank; the ranks it then SIGTERMs are not the cause.

``torchrun-2.13-gloo-rank1-sigkill.log`` is real output: ``torchrun --nproc_per_node=2`` of a
gloo DDP loop (torch 2.13.0 CPU) whose rank 1 got ``kill -9`` at step 30, the venv path
replaced by /opt/venv. torchrun then SIGTERMed rank 0, so the summary lists rank 0 (-15,
SIGTERM) under ``Failures:`` and rank 1 (-9, SIGKILL) as the root cause.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rgt.agent._classify import AttemptFacts, decide
from rgt.triage import classify
from rgt.triage.launchers import first_failure, focus, root_cause

HERE = Path(__file__).parent / "launchers"
TORCHRUN = (HERE / "torchrun-2.13-gloo-rank1-sigkill.log").read_text()
# Real output of `deepspeed --num_gpus 2` (deepspeed 0.19.8, CPU accelerator, gloo) whose
# rank 1 raised a ValueError; paths replaced by /opt/venv and /work.
DEEPSPEED_NEW = (HERE / "deepspeed-0.19.8-cpu-rank1-valueerror.log").read_text()
# The squeezed summary of an older torch, as quoted in a public issue (tests/triage/public).
SQUEEZED = """torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
experiments/supervised HO3D V2.py FAILED
Failures:
<NO OTHER FAILURES>
Root Cause (first observed failure) :
rank2 (local rank: 2)exitcode: -9 (pid: 36071)error file: <N/A>
traceback : signal 9 (SIGKILL) received by PID 36071
"""
DEEPSPEED = """[launch.py:319:sigkill_handler] Killing subprocess 4100
[launch.py:315:sigkill_handler] process 4101 exits with return code = -9
"""


def test_the_root_cause_is_the_first_failing_rank_not_the_survivors() -> None:
    rank = root_cause(TORCHRUN)
    assert rank is not None
    assert (rank.rank, rank.local_rank, rank.exit_code, rank.signal) == (1, 1, -9, 9)
    assert rank.describe().startswith("torchrun: first failing rank 1, pid ")
    assert rank.describe().endswith("killed by SIGKILL")


@pytest.mark.parametrize(
    ("text", "rank", "code"), [(SQUEEZED, 2, -9), (DEEPSPEED, None, -9)], ids=["old", "deepspeed"]
)
def test_other_spellings_of_the_summary(text: str, rank: int | None, code: int) -> None:
    found = root_cause(text)
    assert found is not None
    assert (found.rank, found.exit_code) == (rank, code)


def test_no_launcher_no_root_cause() -> None:
    assert root_cause("Traceback (most recent call last):\nValueError: x\n") is None
    assert focus("plain log\n") == "plain log\n"


def test_focus_drops_the_cascade_and_keeps_the_root_cause() -> None:
    focused = focus(TORCHRUN)
    assert "(SIGTERM)" not in focused and "exitcode  : -15" not in focused
    assert "exitcode  : -9" in focused and "Signal 9 (SIGKILL)" in focused


def test_offline_triage_reads_the_root_cause_not_the_survivors_sigterm() -> None:
    # Before focus, rank 0's SIGTERM (sent by torchrun itself) won: "preempted by SIGTERM".
    verdict = classify(TORCHRUN, exit_code=1)
    assert verdict.rule_id == "memory.torchrun_sigkill"
    assert all("-15" not in line for line in verdict.evidence)


def test_the_agent_retries_a_rank_killed_from_outside_without_oom_evidence() -> None:
    decision = decide(AttemptFacts(1, None, TORCHRUN, oom_before=4, oom_after=4))
    assert (decision.label, decision.retryable) == ("preempted", True)
    assert "rank 1" in decision.cause and "SIGKILL" in decision.cause
    assert decision.evidence[0].startswith("torchrun: first failing rank 1")
    assert decision.evidence[1] == "cgroup oom_kill unchanged (4) during the attempt"


def test_the_agent_says_host_oom_only_with_the_counter_as_evidence() -> None:
    decision = decide(AttemptFacts(1, None, TORCHRUN, oom_before=4, oom_after=5))
    assert (decision.label, decision.retryable) == ("host_oom", False)


def test_a_kill_the_agent_sent_itself_is_left_to_the_rule_base() -> None:
    decision = decide(AttemptFacts(1, None, TORCHRUN, agent_sent_signal=True))
    assert decision.label == classify(TORCHRUN, exit_code=1).label == "host_oom"


def test_deepspeed_names_the_failing_child_by_its_local_rank() -> None:
    rank = root_cause(DEEPSPEED_NEW)
    assert rank is not None
    assert (rank.launcher, rank.rank, rank.exit_code, rank.pid) == ("deepspeed", 1, 1, 30999)


def test_a_failing_rank_with_a_traceback_gets_its_own_label_not_the_cascade() -> None:
    facts = AttemptFacts(1, None, DEEPSPEED_NEW, oom_before=0, oom_after=0)
    facts.rank_tails = {
        1: 'Traceback (most recent call last):\n  File "/work/d.py", line 7, '
        'in <module>\n    raise ValueError("rank 1 fails")\n'
        "ValueError: rank 1 fails\n"
    }
    decision = decide(facts)
    assert (decision.label, decision.retryable) == ("code_error", False)
    assert decision.evidence[0] == (
        "deepspeed: first failing rank 1, pid 30999, exit code 1, read from its own log"
    )


def test_a_killed_rank_named_by_the_kernel_log_is_host_oom() -> None:
    line = "Memory cgroup out of memory: Killed process 17631 (python) total-vm:984136kB"
    facts = AttemptFacts(1, None, TORCHRUN, oom_before=None, oom_after=None)
    facts.kernel_oom = [(17631, line)]
    decision = decide(facts)
    assert (decision.label, decision.retryable) == ("host_oom", False)
    assert decision.evidence == [
        "torchrun: first failing rank 1, pid 17631, killed by SIGKILL",
        "kernel log: " + line,
    ]


def test_another_pids_oom_kill_is_no_evidence_against_this_rank() -> None:
    facts = AttemptFacts(1, None, TORCHRUN, oom_before=2, oom_after=2)
    facts.kernel_oom = [(999, "Out of memory: Killed process 999 (other)")]
    facts.host_oom_delta = 1  # another container on the host: the cgroup counter says no
    assert decide(facts).label == "preempted"


def test_the_host_counter_is_evidence_only_where_the_cgroup_counter_is_unreadable() -> None:
    facts = AttemptFacts(1, None, TORCHRUN)
    facts.host_oom_delta = 1
    decision = decide(facts)
    assert decision.label == "host_oom"
    assert "the cgroup counter is unreadable here" in decision.evidence[-1]


# Real output of `PET_TEE=3 torchrun --nproc_per_node=2` (torch 2.13.0 CPU, the default
# "[default<local rank>]:" prefix) of two gloo ranks whose rank 1 raised a ValueError at step
# 3; rank 0 then failed in all_reduce. Paths replaced by /opt/venv and /work.
TEE = (HERE / "torchrun-2.13-gloo-tee-rank1-valueerror.log").read_text()


def test_a_prefixed_log_is_read_from_the_first_failing_ranks_lines() -> None:
    # Before: rank 0's gloo error (the cascade) won as `nccl`, or the prefixes hid every
    # traceback from the rules that read a line from its start.
    verdict = classify(TEE, exit_code=1)
    assert verdict.label == "code_error"
    assert verdict.evidence[0] == "/work/t.py:9 in <module>: ValueError: bad batch on rank 1"
    focused = focus(TEE)
    assert "Connection closed by peer" not in focused and "ChildFailedError" not in focused
    assert "step 2 rank 0" not in focused and "[default" not in focused


# torchrun's summary when the peer of a SIGKILLed rank exited (gloo "Connection closed by
# peer") in the same second: failures are ordered by whole seconds, ties go to the lowest rank
# (torch/distributed/elastic/multiprocessing/errors get_first_failure). Written in the real
# summary's format from the fixture above: in 6 trials by hand (tight all_reduce loop, kill -9
# of rank 1, then of rank 0) torchrun always saw the SIGKILLed rank first, so no recorded log.
SAME_SECOND = """torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
train.py FAILED
------------------------------------------------------------
Failures:
[1]:
  time      : 2026-12-06_20:05:25
  host      : localhost
  rank      : 1 (local_rank: 1)
  exitcode  : -9 (pid: 17631)  (SIGKILL)
  error_file: <N/A>
  traceback : Signal 9 (SIGKILL) received by PID 17631
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-12-06_20:05:25
  host      : localhost
  rank      : 0 (local_rank: 0)
  exitcode  : 1 (pid: 17630)
  error_file: <N/A>
  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html
============================================================
"""


def test_a_sigkilled_rank_in_the_same_second_is_the_first_failure() -> None:
    rank = first_failure(SAME_SECOND)
    assert rank is not None and (rank.rank, rank.signal) == (1, 9)
    assert rank.describe().startswith("torchrun: first failing rank 1, pid 17631, killed by")
    assert "torchrun named rank 0, exit code 1, in the same second" in rank.describe()
    decision = decide(AttemptFacts(1, None, SAME_SECOND, oom_before=0, oom_after=0))
    assert (decision.label, decision.retryable) == ("preempted", True)
    # A SIGKILL a second or more later is torchrun's own escalation on a survivor.
    first_entry = "time      : 2026-12-06_20:05:25\n  host      : localhost\n  rank      : 1"
    later = SAME_SECOND.replace(first_entry, first_entry.replace("20:05:25", "20:05:56"))
    assert first_failure(later).rank == 0  # type: ignore[union-attr]
    assert first_failure(TORCHRUN).rank == 1  # type: ignore[union-attr]
