"""Every autostop watcher a test started is stopped when the test ends.

A watcher (``agent.pyz autostop ROOT``) runs detached, by design: it outlives the command that
armed it. It ends by itself once its policy file is gone, but a failed run keeps its temp dirs
(pytest's basetemp), so without this its watchers would tick for ever after the run."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest


def watchers_under(folder: Path) -> list[int]:
    """Pids of the autostop watchers whose ROOT is under ``folder``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue  # ended meanwhile
        words = [word.decode("utf-8", "replace") for word in argv]
        if "autostop" in words and any(word.startswith(str(folder)) for word in words):
            found.append(int(entry.name))
    return found


@pytest.fixture(autouse=True)
def _stop_watchers(tmp_path: Path) -> Iterator[None]:
    yield
    for pid in watchers_under(tmp_path.resolve()):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
