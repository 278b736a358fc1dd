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
