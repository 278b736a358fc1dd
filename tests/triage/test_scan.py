"""The whole-file scan (``scan_file``): the same lines a regex-per-line scan finds, a failure
far before the tail is found, and bad input (binary, empty, one endless line) in bounded work."""

from __future__ import annotations

from pathlib import Path

import pytest

from rgt.triage import classify, default_rules, read_tail
from rgt.triage import scan as scan_module
from rgt.triage.scan import _plan, hit_lines, scan_file
from tests.triage.triage_corpus import load_corpus

HEALTHY = b"[12:00:07] step 1200 loss 0.4312 lr 2.0e-04 grad_norm 1.23 error rate 0.01\n"


def test_hit_lines_are_exactly_the_lines_some_pattern_matches() -> None:
    patterns = [p for rule in default_rules() for p in rule.patterns]
    text = "\n".join(fx.log for fx in load_corpus()) + "\n" + HEALTHY.decode() * 50
    expected = [line for line in text.split("\n") if any(p.search(line) for p in patterns)]
    found = hit_lines(_plan(tuple(patterns)), text.encode("utf-8"))
    assert [line for _, line in found] == expected
    assert len(expected) > 200  # the corpus's failure lines, not a vacuous equality


def test_a_failure_long_before_the_tail_is_found(tmp_path: Path) -> None:
    log = tmp_path / "attempt-1.log"
    body = HEALTHY * 8000  # ~600 KiB of training, beyond the 256 KiB tail
    log.write_bytes(b"OSError: [Errno 28] No space left on device\n" + body)
    assert classify(read_tail(str(log)), exit_code=1).label == "unknown"
    verdict = scan_file(str(log), exit_code=1)
    assert verdict.label == "disk_full"
    assert any("No space left on device" in line for line in verdict.evidence)


def test_grep_python_and_small_chunks_find_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "attempt-1.log"
    lines = [HEALTHY * 3000, b"RuntimeError: CUDA error: device-side assert triggered\n"]
    log.write_bytes(b"".join(lines * 3) + HEALTHY * 4000)
    whole = scan_file(str(log), exit_code=1)  # GNU grep as the prefilter, where there is one
    monkeypatch.setattr(scan_module._grep, "gnu_grep", lambda: None)
    assert scan_file(str(log), exit_code=1) == whole  # Python reads it, one chunk
    monkeypatch.setattr(scan_module, "CHUNK", 4096)
    assert scan_file(str(log), exit_code=1) == whole  # many chunks
    assert whole.label == "device_assert" and len(whole.evidence) == 3


@pytest.mark.parametrize(
    "content",
    [b"", bytes(range(256)) * 4000, b"x" * (3 * 1024 * 1024), "é😀 loss nan\n".encode() * 30000],
)
def test_bad_input_gets_a_verdict(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, content: bytes
) -> None:
    monkeypatch.setattr(scan_module, "CHUNK", 64 * 1024)  # the endless line is cut, not held
    log = tmp_path / "attempt-1.log"
    log.write_bytes(content)
    verdict = scan_file(str(log), exit_code=1)
    assert verdict.label == classify(read_tail(str(log)), exit_code=1).label
    monkeypatch.setattr(scan_module._grep, "gnu_grep", lambda: None)
    assert scan_file(str(log), exit_code=1) == verdict
