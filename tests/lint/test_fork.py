"""The forked children `rgt lint` shares its files with: same outcome as one process, whatever
a child does, and no child left behind."""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import threading
import time
from pathlib import Path

import pytest

from rgt.lint import _fork, _run, lint_paths
from tests.lint.measure import CORPUS


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The pids of the children ``spread`` forks."""
    pids: list[int] = []
    real = _fork._start

    def start(*args):  # type: ignore[no-untyped-def]
        child = real(*args)
        if child is not None:
            pids.append(child[0])
        return child

    monkeypatch.setattr(_fork, "_start", start)
    return pids


def _reaped(pid: int) -> bool:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return False


def square(n: int, in_child: bool) -> tuple[int, int, bool]:
    return n, n * n, in_child


def test_results_come_back_in_order_and_a_slow_process_claims_less(started: list[int]) -> None:
    def slow_here(n: int, in_child: bool) -> tuple[int, int, bool]:
        if not in_child:
            time.sleep(0.2)  # the children claim the next items meanwhile
        return square(n, in_child)

    results = _fork.spread(list(range(12)), slow_here, 3)
    assert [r[:2] for r in results] == [(n, n * n) for n in range(12)]
    assert sum(1 for r in results if not r[2]) < 6  # the children claimed most
    assert len(started) == 2 and all(_reaped(pid) for pid in started)


def test_a_child_that_raises_or_is_killed_has_its_items_done_here(started: list[int]) -> None:
    def fragile(n: int, in_child: bool) -> tuple[int, int, bool]:
        if in_child and n == 3:
            raise RuntimeError("boom")
        if in_child and n == 4:
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(0.01)
        return square(n, in_child)

    results = _fork.spread(list(range(8)), fragile, 3)
    assert [r[:2] for r in results] == [(n, n * n) for n in range(8)]
    assert not results[3][2] and not results[4][2]  # whoever claimed them, done here
    assert len(started) == 2 and all(_reaped(pid) for pid in started)


def test_an_error_in_the_parent_leaves_no_child_running(started: list[int]) -> None:
    def stuck_children(n: int, in_child: bool) -> int:
        if in_child:
            threading.Event().wait(60)  # would outlive the test if not stopped
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):  # each child blocks on its first item: 3rd is ours
        _fork.spread(list(range(10)), stuck_children, 3)
    assert len(started) == 2 and all(_reaped(pid) for pid in started)


@pytest.mark.skipif(not hasattr(fcntl, "F_SETPIPE_SZ"), reason="Linux pipe sizes")
def test_groups_that_do_not_fit_a_small_pipe_are_done_all_the_same(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def small_pipe() -> tuple[int, int]:
        read_end, write_end = real_pipe()
        fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, 4096)  # 1024 group numbers, not 3000
        return read_end, write_end

    real_pipe = os.pipe
    monkeypatch.setattr(_fork.os, "pipe", small_pipe)
    monkeypatch.setattr(_fork, "MAX_GROUPS", 3000)
    results = _fork.spread(list(range(3000)), square, 2)
    assert [r[:2] for r in results] == [(n, n * n) for n in range(3000)]


def test_no_fork_for_one_process_and_groups_for_many_items(started: list[int]) -> None:
    assert _fork.spread([1, 2], square, 1) == [(1, 1, False), (2, 4, False)]
    assert started == []
    groups = _fork._groups(5000)
    assert len(groups) <= _fork.MAX_GROUPS and [i for g in groups for i in g] == list(range(5000))


def test_no_fork_while_another_thread_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    with monkeypatch.context() as alone:  # other tests' servers may run threads in this process
        alone.setattr(threading, "active_count", lambda: 1)
        assert _fork.usable() == hasattr(os, "fork")
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        assert not _fork.usable()
    finally:
        stop.set()
        other.join()


def test_many_files_in_children_find_what_one_process_finds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, started: list[int]
) -> None:
    scripts = sorted((CORPUS / "dev").glob("*.py.txt"))[:20]
    for script in scripts:
        shutil.copyfile(script, tmp_path / script.name.removesuffix(".txt"))
    (tmp_path / "broken.py").write_text("import torch\ndef f(:\n    loss.backward()\n")
    monkeypatch.setattr(os, "cpu_count", lambda: 3)
    # Other tests' servers may have left threads in this process: fork all the same (the
    # children only parse and check; `rgt lint` itself runs one thread).
    monkeypatch.setattr(_fork, "usable", lambda: True)
    parallel = lint_paths([str(tmp_path)], cache=False)
    assert len(started) == 2  # the fork path ran: 3 processes, two of them children
    monkeypatch.setattr(_run, "PARALLEL_FROM", 10**6)
    serial = lint_paths([str(tmp_path)], cache=False)
    assert parallel.findings == serial.findings and len(parallel.findings) > 20
    assert parallel.skipped == serial.skipped and len(serial.skipped) == 1
