"""A task that srun reports "Killed": a SIGKILL, OOM only with evidence of one.

The two logs are real output of Debian's slurm-wlm 22.05.8 (the test cluster,
``tests/slurm.py``): ``srun -n1 sh -c 'kill -9 $$'`` and ``srun -n2 sh -c '…; kill -9 $$'`` in a
batch job, then ``echo srun exit $?``. srun's tasks are slurmstepd's children, outside the
agent's process tree and cgroup: the agent's own OOM counter cannot speak for them, so the
kernel log and the host's counter do. Slurm names an OOM kill in the step's cgroup itself
("task 0: Out Of Memory", slurmstepd's "Detected 1 oom-kill event(s)"), which stays host_oom.
"""

from __future__ import annotations

from rgt.agent._classify import AttemptFacts, decide
from rgt.triage import classify
from rgt.triage.launchers import first_failure

ONE = """srun: error: vm: task 0: Killed
srun: Force Terminated StepId=1.0
"""
TWO = """rank 0
rank 1
srun: error: vm: tasks 0-1: Killed
srun: Force Terminated StepId=2.0
"""
# The shape Slurm's cgroup OOM report takes (task/cgroup with a memory limit).
STEPD_OOM = """slurmstepd: error: Detected 1 oom-kill event(s) in StepId=7.0. Some of your \
processes may have been killed by the cgroup out-of-memory handler.
srun: error: gpu3: task 0: Out Of Memory
srun: error: gpu3: task 1: Killed
"""


def facts(log: str, **more: object) -> AttemptFacts:
    found = AttemptFacts(137, None, log, oom_before=0, oom_after=0, pid=4242)
    for key, value in more.items():
        setattr(found, key, value)
    return found


def test_the_killed_task_is_named_with_its_node() -> None:
    rank = first_failure(ONE)
    assert rank is not None and (rank.launcher, rank.rank, rank.signal) == ("srun", 0, 9)
    assert rank.describe() == "srun: first failing rank 0, killed by SIGKILL on vm"
    several = first_failure(TWO)
    assert several is not None and several.rank == 0 and several.signal == 9


def test_a_sigkill_without_oom_evidence_is_a_retryable_kill_from_outside() -> None:
    verdict = decide(facts(ONE))
    assert (verdict.label, verdict.retryable) == ("preempted", True), verdict.to_json()
    assert verdict.evidence == [
        "srun: first failing rank 0, killed by SIGKILL on vm",
        "no kernel OOM line and no host oom_kill during the attempt",
    ]
    # the bare log, without the agent's readings, stays host_oom (the rules' convention)
    assert classify(ONE, exit_code=137).label == "host_oom"


def test_a_kernel_oom_line_or_the_host_counter_makes_it_host_oom() -> None:
    line = "Out of memory: Killed process 5150 (python) total-vm:9000000kB"
    by_log = decide(facts(TWO, kernel_oom=[(5150, line)]))
    assert by_log.label == "host_oom" and by_log.evidence[-1] == "kernel log: " + line
    by_counter = decide(facts(ONE, host_oom_delta=1))
    assert (by_counter.label, by_counter.retryable) == ("host_oom", False)
    assert "srun's tasks are outside the agent's cgroup" in by_counter.evidence[-1]


def test_slurms_own_oom_report_is_host_oom_whatever_the_other_tasks_say() -> None:
    assert first_failure(STEPD_OOM) is None
    verdict = decide(facts(STEPD_OOM))
    assert (verdict.label, verdict.retryable) == ("host_oom", False), verdict.to_json()
