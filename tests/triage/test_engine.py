"""The triage engine: precedence, status and context rules, evidence, tails of huge logs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rgt.triage import Verdict, classify, normalize_status, read_tail

OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."
TRACEBACK = 'Traceback (most recent call last):\n  File "train.py", line 3, in <module>\n'


@pytest.mark.parametrize(
    ("exit_code", "signal", "want"),
    [
        (137, None, 9),
        (-9, None, 9),
        (143, None, 15),
        (129, None, 1),
        (1, None, None),
        (0, None, None),
        (None, None, None),
        (137, 15, 15),
    ],
)
def test_normalize_status_derives_the_signal(
    exit_code: int | None, signal: int | None, want: int | None
) -> None:
    assert normalize_status(exit_code, signal) == (exit_code, want)


def test_verdict_json_shape_is_the_contract() -> None:
    data = classify(TRACEBACK + "RuntimeError: " + OOM, exit_code=1).to_dict()
    assert set(data) == {
        "label",
        "secondary",
        "retryable",
        "cause",
        "remedy",
        "evidence",
        "rule_id",
    }
    assert data["label"] == "cuda_oom" and data["retryable"] is False
    assert data["evidence"] == ["RuntimeError: " + OOM]


def test_unknown_shows_the_last_lines() -> None:
    log = "\n".join(f"line {i}" for i in range(30)) + "\nsomething odd happened\n"
    verdict = classify(log, exit_code=1)
    assert verdict == Verdict(label="unknown", evidence=verdict.evidence)
    assert verdict.evidence[-1] == "something odd happened"
    assert len(verdict.evidence) == 8


def test_an_exception_as_the_last_words_is_code_error_even_without_its_traceback() -> None:
    cut = "\n".join(f"line {i}" for i in range(30)) + "\nValueError: something odd\n\n"
    verdict = classify(cut, exit_code=1)
    assert (verdict.label, verdict.rule_id) == ("code_error", "code.exception_at_end")
    assert verdict.evidence == ["ValueError: something odd"]
    earlier = "ValueError: something odd\n" + "\n".join(f"step {i}" for i in range(5))
    assert classify(earlier, exit_code=1).label == "unknown"


def test_bare_killed_is_host_oom_but_not_with_a_traceback() -> None:
    assert classify("epoch 3\nKilled\n", exit_code=137).label == "host_oom"
    assert classify("epoch 3\nKilled\n").label == "host_oom"
    # A program that printed its own traceback and exited 137 was not silently killed.
    with_traceback = classify(TRACEBACK + "KeyError: 'x'\nKilled\n", exit_code=137)
    assert with_traceback.label == "code_error"


def test_exit_137_without_any_text_is_host_oom_and_time_limit_wins() -> None:
    assert classify("step 10\n", exit_code=137).rule_id == "memory.sigkill_no_traceback"
    limited = classify("step 10\nKilled\n", exit_code=137, context={"time_limit": True})
    assert (limited.label, limited.secondary) == ("preempted", [])
    assert limited.retryable


def test_oom_kill_counter_names_host_oom_without_text() -> None:
    verdict = classify("step 1\n", exit_code=1, context={"oom_kill_delta": 2})
    assert verdict.rule_id == "memory.host_oom_counter"
    assert verdict.evidence == ["exit code 1, oom_kill_delta=2"]


@pytest.mark.parametrize("reading", ["1", None, [1], {"x": 1}])
def test_a_reading_of_the_wrong_type_never_satisfies_a_predicate(reading: object) -> None:
    assert classify("step 1\n", exit_code=1, context={"oom_kill_delta": reading}).label == "unknown"


def test_sigterm_without_traceback_is_preemption_and_retryable() -> None:
    verdict = classify("step 5\n", exit_code=143)
    assert (verdict.label, verdict.retryable) == ("preempted", True)


def test_a_successful_exit_only_reports_a_nan_loss() -> None:
    assert classify(TRACEBACK + "RuntimeError: " + OOM, exit_code=0).label == "unknown"
    assert classify("{'loss': nan, 'epoch': 1.0}\n", exit_code=0).label == "nan_loss"


def test_a_real_cause_outranks_the_nccl_timeout_it_triggered() -> None:
    log = (
        "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5) ran for "
        "600044 milliseconds before timing out.\nRuntimeError: CUDA error: device-side assert "
        "triggered\n"
    )
    verdict = classify(log, exit_code=1)
    assert (verdict.label, verdict.secondary) == ("device_assert", ["nccl"])


def test_nccl_peer_loss_is_the_retryable_nccl_rule() -> None:
    plain = classify("RuntimeError: NCCL error in: x.cpp:1, unhandled system error\n")
    peer = classify("ncclRemoteError: remote process exited or there was a network error\n")
    assert (plain.label, plain.retryable) == ("nccl", False)
    assert (peer.label, peer.retryable, peer.rule_id) == (
        "nccl",
        True,
        "distributed.nccl_peer_lost",
    )


def test_gpu_hw_remedy_says_another_machine() -> None:
    verdict = classify("NVRM: Xid (PCI:0000:41:00): 79, pid=1, GPU has fallen off the bus.\n")
    assert verdict.label == "gpu_hw" and verdict.retryable
    assert "another machine" in verdict.remedy


def test_harmless_xid_is_not_hardware() -> None:
    # Xid 13 is a graphics-engine exception, usually the program's own out-of-range access.
    assert (
        classify("NVRM: Xid (PCI:0000:41:00): 13, pid=1, Graphics Exception\n").label == "unknown"
    )


def test_evidence_is_trimmed_and_shows_carriage_returns() -> None:
    long_line = "RuntimeError: CUDA out of memory. " + "x" * 1000
    assert len(classify(long_line).evidence[0]) == 300
    bar = "  3%|#  | 3/100 [00:01<00:30]\r 4%|#  | 4/100 [00:01<00:29]\rKilled\n"
    assert classify(bar).evidence == ["Killed"]
    crlf = classify("train.sh: line 2: set: -\r: invalid option\n")
    assert crlf.label == "crlf" and crlf.evidence == ["train.sh: line 2: set: -\\r: invalid option"]


def _write_big_log(path: Path, megabytes: int, tail: str, head: str = "") -> None:
    line = "step 123456 loss 0.123456 lr 0.000300 grad_norm 1.234 throughput 812.3 it/s\n"
    block = line * (1024 * 1024 // len(line))
    with path.open("w", encoding="utf-8") as handle:
        handle.write(head)
        for _ in range(megabytes):
            handle.write(block)
        handle.write(tail)


def test_read_tail_reads_only_the_end_of_a_huge_log(hostile_dir: Path) -> None:
    log = hostile_dir / "attempt 1.log"
    _write_big_log(
        log,
        8,
        TRACEBACK + "RuntimeError: " + OOM + "\n",
        head="RuntimeError: NCCL error in: early.cpp:1, unhandled system error\n",
    )
    assert os.path.getsize(log) > 8 * 1024 * 1024
    tail = read_tail(str(log))
    assert len(tail.encode()) <= 256 * 1024
    assert tail.startswith("step ")  # cut at a line boundary
    verdict = classify(tail, exit_code=1)
    # The early NCCL line is outside the tail: only what the tail shows is evidence.
    assert (verdict.label, verdict.secondary) == ("cuda_oom", [])


def test_read_tail_of_a_small_file_and_of_undecodable_bytes(tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    log.write_bytes(b"first line\n\xff\xfe broken bytes\nKilled\n")
    tail = read_tail(str(log), max_bytes=1024)
    assert tail.startswith("first line") and tail.endswith("Killed\n")
    assert "\ufffd" in tail
    assert read_tail(str(log), max_bytes=7) == "Killed\n"
