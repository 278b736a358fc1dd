"""`--explain`: the rule and lines that decided, every rule that fired, the runner-up label."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from rgt.triage import classify
from rgt.triage.explain import explain

# A host OOM that took NCCL down with it: cause before symptom, and the symptom is the runner-up.
OOM_THEN_NCCL = (
    "step 812 loss 1.93\n"
    "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1191, unhandled system error\n"
    "slurmstepd: error: Detected 1 oom-kill event(s) in StepId=191.batch cgroup.\n"
)


def test_explanation_names_the_deciding_rule_lines_and_runner_up() -> None:
    why = explain(OOM_THEN_NCCL, exit_code=1)
    assert why.verdict == classify(OOM_THEN_NCCL, exit_code=1)
    assert (why.verdict.label, why.verdict.rule_id) == ("host_oom", "memory.host_oom_killer")
    assert (why.runner_up, why.runner_up_rule) == ("nccl", "distributed.nccl")
    by_rule = {firing.rule_id: firing for firing in why.fired}
    assert by_rule["distributed.nccl"].lines == [OOM_THEN_NCCL.splitlines()[1]]
    data = why.to_dict()
    assert data["decided_by"] == "memory.host_oom_killer"
    assert data["lines"] == [OOM_THEN_NCCL.splitlines()[2]]


def test_a_rule_that_yields_is_listed_as_silenced_and_ranks_below_the_others() -> None:
    log = "step 3\nRuntimeError: CUDA error: uncorrectable ECC error encountered\n"
    why = explain(log, exit_code=1)
    assert why.verdict.label == "gpu_hw"
    silenced = [f for f in why.fired if f.silenced_by]
    assert [(f.rule_id, f.silenced_by) for f in silenced] == [("code.exception_at_end", ["gpu_hw"])]
    assert why.runner_up == "code_error"


def test_nothing_fired_means_no_runner_up() -> None:
    why = explain("step 1 loss 0.5\nstep 2 loss 0.4\n", exit_code=1)
    assert (why.verdict.label, why.fired, why.runner_up) == ("unknown", [], None)


def test_cli_explain_in_json_and_human(tmp_path: Path) -> None:
    log = tmp_path / "attempt-1.log"
    log.write_text(OOM_THEN_NCCL)
    argv = [sys.executable, "-m", "rgt.cli", "triage", str(log), "--exit-code", "1", "--explain"]
    human = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True).stdout
    assert "decided by: rule memory.host_oom_killer" in human
    assert "runner-up: nccl (rule distributed.nccl)" in human
    as_json = subprocess.run(
        [*argv, "--json"], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    data = json.loads(as_json)
    assert data["label"] == "host_oom" and data["explain"]["runner_up"] == "nccl"
