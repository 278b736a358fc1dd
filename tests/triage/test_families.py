"""Symptom families, not phrasings: each reporter of a failure, written the way that tool prints it.

The lines below follow the formats the tools document or print (Slurm's slurmstepd, LSF's job
report, PBS's epilogue, the kernel, systemd-oomd, ``kubectl describe``, torch's ProcessGroupNCCL
across 1.x/2.x, bash and env on a CRLF script). The generalization corpus measures the rules on
real logs; these pin each family member so a later edit cannot drop one silently.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rgt.triage import RuleFileError, classify, default_rules, read_tail, scan_file
from rgt.triage.engine import DEFAULT_TAIL_BYTES
from rgt.triage.rules import parse_rule

NAN_LINES = [
    "step 11 loss nan",
    "step 11 | loss: nan | lr: 3.0e-04",
    "iter 400  total_loss: nan  loss_cls: nan  time: 0.41",
    "train_loss=nan val_loss=nan",
    "avr_loss=nan",
    "{'loss': nan, 'grad_norm': nan, 'learning_rate': 2e-05, 'epoch': 0.31}",
    '{"step": 12, "loss": NaN, "lr": 0.0003}',
    "Epoch 3:  42%|####2     | 420/1000 [01:10<01:37, 5.94it/s, loss=nan, v_num=3]",
    "120/500 [=====>........] - ETA: 1:02 - loss: nan - accuracy: 0.1000",
    "| train/loss | nan |",
    "grad norm: nan | loss scale: 1.0",
    "loss_net: inf norm: 3.2",
    "eval_perplexity = inf",
    "loss tensor(nan, device='cuda:0', grad_fn=<AddBackward0>)",
    "The loss returned in `training_step` is nan.",
    "Gradients are NaN at step 3",
]
HEALTHY_LINES = [
    "step 11 loss 0.4312 grad_norm 1.02 lr 3e-4",
    "nan_count=0 inf_count=0 loss=0.23",
    "loss_scale: 65536.0 skipped_steps: 0",
    "Gradient overflow. Skipping step, loss scaler 0 reducing loss scale to 32768.0",
    "{'loss': 0.5123, 'grad_norm': 0.91, 'learning_rate': 2e-05, 'epoch': 1.0}",
    "finance dataset loaded: 1200 rows",
]


@pytest.mark.parametrize("line", NAN_LINES)
def test_nan_in_any_metric_line_format_is_nan_loss(line: str) -> None:
    assert classify(f"step 10 loss 0.71\n{line}\n", exit_code=0).label == "nan_loss"


@pytest.mark.parametrize("line", HEALTHY_LINES)
def test_healthy_metric_lines_are_not_a_nan(line: str) -> None:
    assert classify(f"{line}\n", exit_code=0).label == "unknown"


HOST_OOM = [
    "slurmstepd: error: Detected 1 oom_kill event in StepId=42.0. Some of the step tasks have "
    "been OOM Killed.",
    "slurmstepd: error: Detected 2 oom-kill event(s) in StepId=42.batch. Some of your processes "
    "may have been killed by the cgroup out-of-memory handler.",
    "slurmstepd: error: Exceeded job memory limit",
    "TERM_MEMLIMIT: job killed after reaching LSF memory usage limit.\nExited with exit code 1.",
    "=>> PBS: job killed: mem 33554432kb exceeded limit 16777216kb",
    "[ 812.33] python invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=0",
    "[ 812.35] Memory cgroup out of memory: Killed process 4242 (python) total-vm:9GB",
    "systemd-oomd[812]: Killed /user.slice/user-1000.slice/session-3.scope due to memory "
    "pressure for /user.slice being 61.2% > 50.0% for > 20s with reclaim activity",
    "systemd[1]: train.service: A process of this unit has been killed by the OOM killer.",
    "    Last State:     Terminated\n      Reason:       OOMKilled\n      Exit Code:    137",
    "Warning  Evicted  pod/train-0  The node was low on resource: memory. Container train was "
    "using 61Gi, which exceeds its request of 32Gi.",
]


@pytest.mark.parametrize("log", HOST_OOM)
def test_host_oom_by_every_reporter(log: str) -> None:
    assert classify(log + "\n").label == "host_oom"


def test_docker_oomkilled_false_is_no_oom_kill() -> None:
    log = '"State": {\n  "Status": "exited",\n  "OOMKilled": false,\n  "ExitCode": 137\n}\n'
    assert classify(log).rule_id != "memory.host_oom_killer"


PREEMPTED = [
    "slurmstepd: error: *** JOB 77 ON gpu12 CANCELLED AT 2024-05-01T10:00:00 DUE TO PREEMPTION ***",
    "=>> PBS: job killed: walltime 86415 exceeded limit 86400",
    "MOAB_INFO:  job exceeded wallclock limit",
    "TERM_RUNLIMIT: job killed after reaching LSF run time limit.",
    "TERM_PREEMPT: job killed after preemption.",
    "  Type: DisruptionTarget  Status: True  Reason: PreemptionByScheduler",
    "Pod was terminated in response to imminent node shutdown.",
    "GCP Metadata Service says termination is imminent",
    "The TPU node was preempted.",
    "Warning  Preempted  pod/train-0  Preempted by pod big-1 on node gpu-3",
]


@pytest.mark.parametrize("log", PREEMPTED)
def test_preemption_and_time_limits_of_every_scheduler_and_cloud(log: str) -> None:
    verdict = classify(log + "\n")
    assert (verdict.label, verdict.retryable) == ("preempted", True)


NCCL = [
    # torch 1.x
    "[E ProcessGroupNCCL.cpp:737] [Rank 1] Watchdog caught collective operation timeout: "
    "WorkNCCL(SeqNum=9, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1800321 milliseconds "
    "before timing out.",
    # torch 2.1-2.3
    "[rank0]:[E ProcessGroupNCCL.cpp:1182] [Rank 0] NCCL watchdog thread terminated with "
    "exception: [Rank 0] Watchdog caught collective operation timeout",
    # torch 2.4+
    "[rank2]:[E1019 01:04:03.356 ProcessGroupNCCL.cpp:1413] [PG 3 Rank 2] Heartbeat monitor timed "
    "out! Process will be terminated after dumping debug info. workMetaList_.size()=121",
    "[rank2]:[F1019 01:14:03.356 ProcessGroupNCCL.cpp:1224] [PG 3 Rank 2] ProcessGroupNCCL's "
    "watchdog got stuck for 600 seconds without making progress in monitoring enqueued "
    "collectives.",
    "[rank1]:[E421 02:05:38.764 ProcessGroupGloo.cpp:143] Gloo connectFullMesh failed with "
    "[../third_party/gloo/gloo/transport/tcp/pair.cc:144] no error",
    "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, remote process "
    "exited or there was a network error",
]


@pytest.mark.parametrize("log", NCCL)
def test_nccl_and_gloo_timeouts_of_three_torch_majors(log: str) -> None:
    assert classify(log + "\n", exit_code=1).label == "nccl"


CRLF = [
    "train.sh: line 2: $'\\r': command not found",
    "/usr/bin/env: 'python\\r': No such file or directory",
    "/usr/bin/env: \u2018/usr/bin/sh\\r\u2019: No such file or directory",
    "-bash: ./run.sh: /bin/bash^M: bad interpreter: No such file or directory",
    "./run.sh: bad interpreter: /bin/bash^M: no such file or directory",
    "usage: train.py [-h] --lr LR\ntrain.py: error: the following arguments are required: --lr\n"
    "./train.sh: line 3: --lr: command not found",
]


@pytest.mark.parametrize("log", CRLF)
def test_crlf_symptoms_without_a_visible_carriage_return(log: str) -> None:
    assert classify(log + "\n", exit_code=127).label == "crlf"


def test_an_import_error_is_a_driver_error_only_for_the_drivers_own_library() -> None:
    toolkit = "ImportError: libcudart.so.11.0: cannot open shared object file: No such file\n"
    cudnn = "OSError: libcudnn_ops_infer.so.8: cannot open shared object file: No such file\n"
    driver = "ImportError: libcuda.so.1: cannot open shared object file: No such file\n"
    assert classify(toolkit, exit_code=1).label == "import_error"
    assert classify(cudnn, exit_code=1).label == "import_error"
    assert classify(driver, exit_code=1).label == "cuda_driver"


def test_shm_exhaustion_is_not_a_full_disk() -> None:
    log = (
        "RuntimeError: unable to write to file </torch_8289_606636967_0>: "
        "No space left on device (28)\n"
    )
    assert classify(log, exit_code=1).label == "shm"


INFO_LINES = "2024-05-01 12:00:07 INFO trainer: step 3 | loss: 0.41 | grad_norm: 1.2\n" * 2000


def test_the_metric_rule_reads_only_lines_with_a_nan_or_inf_word() -> None:
    gated = [rule for rule in default_rules() if rule.line_gate is not None]
    assert [rule.id for rule in gated] == ["numeric.nan_metric"]
    assert classify(INFO_LINES, exit_code=0).label == "unknown"  # INFO is no inf
    verdict = classify(INFO_LINES + "step 4 | loss: nan | grad_norm: inf\n", exit_code=0)
    assert (verdict.label, verdict.evidence) == (
        "nan_loss",
        ["step 4 | loss: nan | grad_norm: inf"],
    )


def test_the_whole_file_scan_finds_a_nan_metric_long_before_the_tail(tmp_path: Path) -> None:
    log = tmp_path / "attempt-1.log"
    log.write_text("step 2 train_loss=nan\n" + INFO_LINES * 3, encoding="utf-8")
    assert log.stat().st_size > DEFAULT_TAIL_BYTES + 100_000
    assert classify(read_tail(str(log)), exit_code=0).label == "unknown"
    assert scan_file(str(log), exit_code=0).label == "nan_loss"


def test_a_line_gate_needs_patterns_to_gate() -> None:
    raw = {"id": "x.y", "label": "nan_loss", "priority": 1, "line_gate": "nan", "retryable": False}
    with pytest.raises(RuleFileError, match="line_gate"):
        parse_rule({**raw, "cause": "c", "remedy": "r"}, "test", "x")
