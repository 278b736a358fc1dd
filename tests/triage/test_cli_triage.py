"""`rgt triage LOGFILE`: a real `rgt` process on real files, human and --json output."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path

import pytest

from tests import clirun

_rgt = partial(clirun.rgt, "triage", timeout=60)


def test_json_verdict_for_a_log_in_a_hostile_path(hostile_dir: Path) -> None:
    log = hostile_dir / "attempt-1.log"
    log.write_text("epoch 2\nOSError: [Errno 28] No space left on device: '/dev/shm/x'\n")
    result = _rgt(str(log), "--json", "--exit-code", "1")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert (data["label"], data["secondary"], data["retryable"]) == ("shm", ["disk_full"], False)
    assert data["evidence"] == ["OSError: [Errno 28] No space left on device: '/dev/shm/x'"]


@pytest.mark.slow  # > 1 s on two cores
def test_exit_code_flag_turns_a_silent_log_into_host_oom(tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    log.write_text("step 100 loss 0.4\n")
    assert json.loads(_rgt(str(log), "--json").stdout)["label"] == "unknown"
    data = json.loads(_rgt(str(log), "--json", "--exit-code", "137").stdout)
    assert (data["label"], data["evidence"]) == ("host_oom", ["exit code 137, signal 9"])
    assert json.loads(_rgt(str(log), "--json", "--signal", "15").stdout)["label"] == "preempted"


def test_human_output_names_label_retry_and_evidence(tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    log.write_text("NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus. [x]\n")
    result = _rgt(str(log))
    assert result.returncode == 0, result.stderr
    assert "label:     gpu_hw" in result.stdout
    assert "retry:     yes" in result.stdout
    assert "GPU has fallen off the bus. [x]" in result.stdout  # evidence printed without markup


def test_a_missing_log_is_a_usage_error(tmp_path: Path) -> None:
    result = _rgt(str(tmp_path / "nope.log"), "--json")
    assert result.returncode == 2
    assert json.loads(result.stdout)["error"] == "UsageError"
    assert "neither a log file nor a job id" in result.stderr


def test_full_reads_a_cause_that_scrolled_out_of_the_tail(tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    cause = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
    filler = "".join(f"[rank1] waiting for rank 0, step {i}\n" for i in range(12_000))
    log.write_text(f"step 1 loss 2.3\n{cause}\n{filler}")
    assert log.stat().st_size > 300 * 1024  # the cause is outside the last 256 KiB
    tail_only = json.loads(_rgt(str(log), "--json", "--exit-code", "1").stdout)
    assert tail_only["label"] != "cuda_oom"
    full = json.loads(_rgt(str(log), "--json", "--exit-code", "1", "--full").stdout)
    assert (full["label"], full["evidence"][0]) == ("cuda_oom", cause)
