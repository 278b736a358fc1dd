"""Work over many items shared by this process and forked children, each child's results sent
back pickled.

A pool (``concurrent.futures``) costs what a two-core lint cannot spare: ~25 ms to import, the
files' text pickled out to every worker, and the parent idle while the workers run. Here a
forked child already holds the items, the parent works too, and a child leaves with
``os._exit`` once its results are written (no interpreter shutdown, no collection).

Items are not dealt out in advance: every process claims the next group of items from a pipe
filled before the fork (a read of one 4-byte group number is one atomic step), so a process
that is slowed (by the machine, or by freeing what it built) simply claims fewer. A child that
fails (an exception, a signal, a short or broken result) is not fatal: whatever it claimed is
done again here, so the outcome is the same as one process's.
"""

from __future__ import annotations

import contextlib
import gc
import os
import pickle
import struct
import sys
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")

# Group numbers are 4 bytes: 1024 of them fill one 4 KiB page, the least buffer any pipe has,
# so all are written before a reader exists. More items than that are claimed a few at a time.
MAX_GROUPS = 1024
RECORD = struct.Struct("<I")


def usable() -> bool:
    """Forking is safe: the platform has it and no other thread could hold a lock the child
    would need (a fork copies a held lock, never its release). A process that never imported
    ``threading`` started no thread through it (nor is it imported here for that)."""
    threading = sys.modules.get("threading")
    return hasattr(os, "fork") and (threading is None or threading.active_count() == 1)


def spread(items: Sequence[T], work: Callable[[T, bool], R], processes: int) -> list[R]:
    """``work(item, in_child)`` for every item, in this process and ``processes - 1``
    children at once, in the order given (give the slowest items first). Results in the order
    of ``items``."""
    groups = _groups(len(items))
    read_end = _claims(len(groups)) if processes > 1 else None
    if read_end is None:
        return [work(item, False) for item in items]
    children: list[tuple[int, int] | None] = []
    try:
        children = [_start(items, groups, work, read_end) for _ in range(processes - 1)]
        done = _claim(items, groups, work, read_end, False)
        for index, child in enumerate(children):
            children[index] = None
            got = _collect(child) if child is not None else None
            if got is not None:
                done.update(got)
        # Groups a child claimed but did not finish, and any that did not fit in the pipe.
        return [done[i] if i in done else work(items[i], False) for i in range(len(items))]
    finally:  # interrupted (Ctrl-C, an error here): no child is left behind
        os.close(read_end)
        for child in children:
            if child is not None:
                _stop(child)


def _groups(count: int) -> list[range]:
    size = max(1, -(-count // MAX_GROUPS))
    return [range(start, min(start + size, count)) for start in range(0, count, size)]


def _claims(count: int) -> int | None:
    """The read end of a pipe holding every group number that fits, its write end closed
    (reads end after the last one). None: no pipe to spare."""
    try:
        read_end, write_end = os.pipe()
    except OSError:
        return None
    written = 0
    try:
        os.set_blocking(write_end, False)
        data = b"".join(RECORD.pack(n) for n in range(count))
        while written < len(data):  # 512-byte writes: each one whole or not at all
            written += os.write(write_end, data[written : written + 512])
    except OSError:  # full (a smaller buffer than promised): the rest are done here at the end
        pass
    finally:
        os.close(write_end)
    return read_end


def _claim(
    items: Sequence[T], groups: list[range], work: Callable[[T, bool], R], claims: int, child: bool
) -> dict[int, R]:
    done: dict[int, R] = {}
    while True:
        record = os.read(claims, RECORD.size)
        if len(record) != RECORD.size:
            return done  # every group claimed
        (group,) = RECORD.unpack(record)
        for index in groups[group]:
            done[index] = work(items[index], child)


def _start(
    items: Sequence[T], groups: list[range], work: Callable[[T, bool], R], claims: int
) -> tuple[int, int] | None:
    try:
        read_end, write_end = os.pipe()
        pid = os.fork()
    except OSError:
        return None  # no process or descriptor to spare: the others claim its share
    if pid == 0:  # the child: never returns
        code = 1
        gc.disable()  # for good: it exits soon, and the work makes no cycles worth finding
        try:
            os.close(read_end)
            done = _claim(items, groups, work, claims, True)
            data = pickle.dumps((done,), protocol=pickle.HIGHEST_PROTOCOL)
            with open(write_end, "wb") as pipe:
                pipe.write(data)
            code = 0
        except BaseException:  # whatever it was, the parent redoes what it claimed
            pass
        finally:
            os._exit(code)
    os.close(write_end)
    return pid, read_end


def _collect(child: tuple[int, int]) -> dict[int, Any] | None:
    """The child's results by item index, or None when it did not finish cleanly."""
    pid, read_end = child
    with open(read_end, "rb") as pipe:
        data = pipe.read()
    _, status = os.waitpid(pid, 0)
    if status != 0 or not data:
        return None
    try:
        got = pickle.loads(data)  # written by this program's own child, never by a machine
    except Exception:  # a torn result: the parent redoes the child's items
        return None
    if not (isinstance(got, tuple) and len(got) == 1 and isinstance(got[0], dict)):
        return None
    return got[0]


def _stop(child: tuple[int, int]) -> None:
    import signal  # only here, on the way out of an error: its enums cost ~1 ms to import

    pid, read_end = child
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    os.close(read_end)
