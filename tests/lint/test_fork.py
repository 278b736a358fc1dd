"""The forked children `rgt lint` shares its files with: same outcome as one process, whatever
a child does, and no child left behind."""

from __future__ import annotations

import os
import shutil
import signal
import threading
from pathlib import Path

import pytest

from rgt.lint import _fork, _run, lint_paths
from rgt.lint._source import Text
from tests.lint.measure import CORPUS


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The pids of the children ``spread`` forks."""
    pids: list[int] = []
    real = _fork._start

    def start(share, work):  # type: ignore[no-untyped-def]
        child = real(share, work)
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


def square_all(share: list[int], in_child: bool) -> list[tuple[int, int, bool]]:
    return [(n, n * n, in_child) for n in share]


def test_shares_come_back_in_order_from_the_children(started: list[int]) -> None:
    results = _fork.spread([[1, 2], [3], [4, 5]], square_all)
    assert [[r[:2] for r in share] for share in results] == [
        [(1, 1), (2, 4)],
        [(3, 9)],
        [(4, 16), (5, 25)],
    ]
    assert [share[0][2] for share in results] == [False, True, True]  # first share: the parent
    assert len(started) == 2 and all(_reaped(pid) for pid in started)


def test_a_child_that_raises_or_is_killed_has_its_share_done_here(started: list[int]) -> None:
    def fragile(share: list[int], in_child: bool) -> list[tuple[int, int, bool]]:
        if in_child and share == [3]:
            raise RuntimeError("boom")
        if in_child and share == [4]:
            os.kill(os.getpid(), signal.SIGKILL)
        return square_all(share, in_child)

    results = _fork.spread([[1], [3], [4]], fragile)
    assert results == [[(1, 1, False)], [(3, 9, False)], [(4, 16, False)]]
    assert len(started) == 2 and all(_reaped(pid) for pid in started)


def test_an_error_in_the_parent_leaves_no_child_running(started: list[int]) -> None:
    def stuck_children(share: list[int], in_child: bool) -> list[int]:
        if in_child:
            threading.Event().wait(60)  # would outlive the test if not stopped
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _fork.spread([[1], [2], [3]], stuck_children)
    assert len(started) == 2 and all(_reaped(pid) for pid in started)


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


def test_shares_are_balanced_by_size() -> None:
    texts = [Text(f"f{n}.py", "x\n" * n) for n in (100, 90, 10, 10, 5, 5)]
    shares = _run._shares(texts, 2)
    sizes = [sum(len(t.text) for t in share) for share in shares]
    assert sizes == [220, 220]  # 100+10+10 | 90+10+5+5 lines of two characters
    assert sorted(t.path for s in shares for t in s) == sorted(t.path for t in texts)


def test_many_files_in_children_find_what_one_process_finds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, started: list[int]
) -> None:
    scripts = sorted((CORPUS / "dev").glob("*.py.txt"))[:20]
    for script in scripts:
        shutil.copyfile(script, tmp_path / script.name.removesuffix(".txt"))
    (tmp_path / "broken.py").write_text("import torch\ndef f(:\n")
    monkeypatch.setattr(os, "cpu_count", lambda: 3)
    # Other tests' servers may have left threads in this process: fork all the same (the
    # children only parse and check; `rgt lint` itself runs one thread).
    monkeypatch.setattr(_fork, "usable", lambda: True)
    parallel = lint_paths([str(tmp_path)], cache=False)
    assert len(started) == 2  # the fork path ran: 3 shares, two of them in children
    monkeypatch.setattr(_run, "PARALLEL_FROM", 10**6)
    serial = lint_paths([str(tmp_path)], cache=False)
    assert parallel.findings == serial.findings and len(parallel.findings) > 20
    assert parallel.skipped == serial.skipped and len(serial.skipped) == 1
