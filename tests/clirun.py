"""The one way tests run the real `rgt` CLI: a fresh `python -m rgt.cli` process.

The child gets the test's environment as it is at the call (so the per-test ``RGT_HOME`` of
tests/conftest.py applies) plus ``env``; stdin is empty unless ``stdin`` gives it text; a call
past ``timeout`` raises ``subprocess.TimeoutExpired`` (the test fails, nothing hangs).
Bind a subcommand with ``functools.partial(rgt, "deliver")`` where a file calls only one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any


def rgt(
    *args: str,
    cwd: Path | str | None = None,
    env: dict[str, str] | None = None,
    stdin: str | None = None,
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """Run ``rgt ARGS…`` and return the finished process (stdout and stderr as text)."""
    return subprocess.run(
        [sys.executable, "-m", "rgt.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, **(env or {})},
        input=stdin,
        stdin=subprocess.DEVNULL if stdin is None else None,
        timeout=timeout,
        check=False,
    )


def ok(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The `--json` document of a call that must have succeeded (exit 0)."""
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    doc: dict[str, Any] = json.loads(proc.stdout)
    return doc


def started(status: Path, timeout: float = 60.0) -> dict[str, Any]:
    """Wait until the agent has written ``status`` past ``queued`` and return it.

    `rgt run` returns once the agent is launched, before the agent's first write: a test that
    kills the agent or reads the job's pid right away must wait for this (an agent killed before
    its first write leaves a job that never ran, a different story).
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            doc = json.loads(status.read_text())
        except (OSError, ValueError):
            doc = {}
        if isinstance(doc, dict) and doc.get("state") not in (None, "queued"):
            return doc
        time.sleep(0.1)
    raise AssertionError(f"{status} never said the job started")
