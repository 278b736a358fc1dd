"""Work split over this process and forked children, each child's result sent back pickled.

A pool (``concurrent.futures``) costs what a two-core lint cannot spare: ~25 ms to import, the
files' text pickled out to every worker, the parent idle while the workers run, and each
worker freeing its syntax trees node by node before it exits. Here a forked child already
holds the texts, the parent takes the first share itself, and a child leaves with
``os._exit`` once its result is written, so nothing it built is ever freed or collected.

A child that fails (an exception, a signal, a short or broken result) is not fatal: its share
is done again in the parent, so the outcome is the same as one process's.
"""

from __future__ import annotations

import contextlib
import gc
import os
import pickle
import signal
import threading
from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


def usable() -> bool:
    """Forking is safe: the platform has it and no other thread could hold a lock the child
    would need (a fork copies a held lock, never its release)."""
    return hasattr(os, "fork") and threading.active_count() == 1


def spread(shares: Sequence[T], work: Callable[[T, bool], R]) -> list[R]:
    """``work(share, in_child)`` for every share: the first here, the others in children (in
    parallel with it). Results in the order of ``shares``."""
    children: list[tuple[int, int] | None] = [_start(share, work) for share in shares[1:]]
    try:
        results = [work(shares[0], False)]
        for index, share in enumerate(shares[1:]):
            child, children[index] = children[index], None
            got: tuple[R] | None = _collect(child) if child is not None else None
            results.append(got[0] if got is not None else work(share, False))
        return results
    finally:  # interrupted (Ctrl-C, an error here): no child is left behind
        for child in children:
            if child is not None:
                _stop(child)


def _start(share: T, work: Callable[[T, bool], R]) -> tuple[int, int] | None:
    try:
        read_end, write_end = os.pipe()
        pid = os.fork()
    except OSError:
        return None  # no process or descriptor to spare: the parent does this share
    if pid == 0:  # the child: never returns
        code = 1
        gc.disable()  # for good: a collection over the trees it keeps cost ~0.17 s, and it exits
        try:
            os.close(read_end)
            data = pickle.dumps((work(share, True),), protocol=pickle.HIGHEST_PROTOCOL)
            with open(write_end, "wb") as pipe:
                pipe.write(data)
            code = 0
        except BaseException:  # whatever it was, the parent redoes the share
            pass
        finally:
            os._exit(code)
    os.close(write_end)
    return pid, read_end


def _collect(child: tuple[int, int]) -> tuple[R] | None:
    """The child's result (a one-tuple), or None when it did not finish cleanly."""
    pid, read_end = child
    with open(read_end, "rb") as pipe:
        data = pipe.read()
    _, status = os.waitpid(pid, 0)
    if status != 0 or not data:
        return None
    try:
        got = pickle.loads(data)  # written by this program's own child, never by a machine
    except Exception:  # a torn result: the parent redoes the share
        return None
    return got if isinstance(got, tuple) and len(got) == 1 else None


def _stop(child: tuple[int, int]) -> None:
    pid, read_end = child
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    os.close(read_end)
