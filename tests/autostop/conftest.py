"""Every autostop watcher and job agent a test started is stopped when the test ends.

A watcher (``agent.pyz autostop ROOT``) and a job's agent (``agent.pyz run JOB_DIR``) run
detached, by design: they outlive the command that started them. A watcher ends by itself once
its policy file is gone and a passing test's job ends, but a failed test leaves its long job
running and a failed run keeps its temp dirs (pytest's basetemp), so without this they would run
on after the run."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest


def agents_under(folder: Path) -> list[int]:
    """Pids of the agents (watchers and job agents) whose ROOT or job dir is under ``folder``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue  # ended meanwhile
        words = [word.decode("utf-8", "replace") for word in argv]
        is_agent = any(word.endswith(".pyz") for word in words) and (
            "autostop" in words or "run" in words
        )
        if is_agent and any(word.startswith(str(folder)) for word in words):
            found.append(int(entry.name))
    return found


@pytest.fixture(autouse=True)
def _stop_agents(tmp_path: Path) -> Iterator[None]:
    yield
    for pid in agents_under(tmp_path.resolve()):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
