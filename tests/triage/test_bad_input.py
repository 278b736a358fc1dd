"""Bad logs: binary, empty, non-UTF-8, huge or still growing -> a label or `unknown` with a reason,
in bounded time and memory (only the tail is ever read)."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from rgt.triage import classify, read_tail
from rgt.triage.engine import DEFAULT_TAIL_BYTES


def test_empty_log_is_unknown_and_says_the_log_is_empty(tmp_path: Path) -> None:
    log = tmp_path / "empty.log"
    log.write_bytes(b"")
    verdict = classify(read_tail(str(log)), exit_code=1)
    assert verdict.label == "unknown" and "the log is empty" in verdict.cause
    assert classify(read_tail(str(log)), exit_code=137).label == "host_oom"  # status still counts


def test_binary_log_is_unknown_and_says_why(tmp_path: Path) -> None:
    log = tmp_path / "core.log"
    log.write_bytes(os.urandom(300_000))
    started = time.monotonic()
    verdict = classify(read_tail(str(log)), exit_code=1)
    assert time.monotonic() - started < 2
    assert verdict.label == "unknown" and "binary or not UTF-8" in verdict.cause


def test_non_utf8_text_still_classifies(tmp_path: Path) -> None:
    log = tmp_path / "latin1.log"
    log.write_bytes("époque 3 - perte 0,41\n".encode("latin-1") + b"\xff\xfe\nKilled\n")
    assert classify(read_tail(str(log))).label == "host_oom"


def test_huge_sparse_log_reads_only_its_tail(tmp_path: Path) -> None:
    log = tmp_path / "huge.log"
    with log.open("wb") as handle:  # 8 GiB apparent size, no disk used: a hole, then the end
        handle.seek(8 * 1024**3)
        handle.write(b"\nstep 9\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate\n")
    started = time.monotonic()
    tail = read_tail(str(log))
    assert len(tail.encode()) <= DEFAULT_TAIL_BYTES
    assert classify(tail, exit_code=1).label == "cuda_oom"
    assert time.monotonic() - started < 2


def test_growing_log_read_stays_bounded(tmp_path: Path) -> None:
    log = tmp_path / "growing.log"
    log.write_bytes(b"x" * 1000 + b"\n")
    stop = threading.Event()

    def writer() -> None:
        with log.open("ab") as handle:
            while not stop.is_set():
                handle.write(b"step 1 loss 0.5\n" * 4096)
                handle.flush()

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        sizes = [len(read_tail(str(log), max_bytes=65536)) for _ in range(50)]
    finally:
        stop.set()
        thread.join()
    assert max(sizes) <= 65536
