"""Validated names end where the text ends (`$` also matches before a trailing newline)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from rgt.errors import UsageError
from rgt.models import JOB_ID_RE, MACHINE_NAME_RE
from rgt.resources import GPUS_RE, NATIVE_RE


def test_a_machine_name_ending_in_a_newline_is_refused(tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "rgt.cli",
            "up",
            "local",
            "--name",
            "box\n",
            "--root",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2, proc.stdout
    listed = subprocess.run(
        [sys.executable, "-m", "rgt.cli", "status", "--json"], capture_output=True, text=True
    )
    assert json.loads(listed.stdout)["machines"] == []


@pytest.mark.parametrize(
    ("regex", "good"),
    [(JOB_ID_RE, "box-1"), (MACHINE_NAME_RE, "box"), (GPUS_RE, "A100:1"), (NATIVE_RE, "a,b")],
)
def test_no_validation_regex_accepts_a_trailing_newline(regex: re.Pattern[str], good: str) -> None:
    assert regex.match(good) and not regex.match(good + "\n")


def test_schemas_refuse_a_trailing_newline() -> None:
    from rgt.profiles.loader import NAME_RE
    from rgt.results import validate_results

    assert NAME_RE.match("generic-ssh") and not NAME_RE.match("generic-ssh\n")
    base = {"schema": "rgt.results/1", "name": "r", "metrics": {"acc": 0.5}}
    sha = "a" * 64
    validate_results({**base, "artifacts": [{"path": "m.pt", "sha256": sha, "bytes": 1}]})
    with pytest.raises(UsageError):
        validate_results(
            {**base, "artifacts": [{"path": "m.pt", "sha256": sha + "\n", "bytes": 1}]}
        )
