"""The gate end to end on the local backend, through the real CLI and agent: a job with no
artifacts can be released; a job launched from another RGT_HOME blocks until adopted."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.jobs.test_local_lifecycle import _approve_at_a_terminal, rgt

WRITES = (
    "import os, pathlib; pathlib.Path(os.environ['RGT_OUTPUT_DIR'], 'r.json').write_text('[1]')"
)


def _run(*command: str, home: Path | None = None) -> str:
    env = {"RGT_HOME": str(home)} if home else None
    proc = rgt("run", "box", "--probe-seconds", "1", "--json", "--", *command, env=env)
    assert proc.returncode == 0, proc.stderr
    job_id = str(json.loads(proc.stdout)["job_id"])
    watched = rgt("watch", job_id, "--interval", "0.3", "--json", env=env)
    assert watched.returncode == 0, watched.stderr
    return job_id


def _failed_checks(proc_stdout: str) -> dict[str, str]:
    checks = json.loads(proc_stdout)["verdict"]["checks"]
    return {c["name"]: c["detail"] for c in checks if not c["ok"]}


@pytest.mark.slow
def test_echo_hi_passes_the_gate_without_a_pull(tmp_path: Path) -> None:
    assert rgt("up", "local", "--name", "box", "--root", str(tmp_path / "root")).returncode == 0
    _run("echo", "hi")
    _approve_at_a_terminal("box")
    released = rgt("down", "box", "--json")
    assert released.returncode == 0, released.stdout + released.stderr
    assert json.loads(released.stdout)["gate"]["jobs"][0]["note"] == "no artifacts"


@pytest.mark.slow
def test_a_job_from_another_rgt_home_blocks_until_adopted(tmp_path: Path) -> None:
    root = str(tmp_path / "shared root")
    other = tmp_path / "other home"
    assert (
        rgt("up", "local", "--name", "box", "--root", root, env={"RGT_HOME": str(other)}).returncode
        == 0
    )
    theirs = _run(sys.executable, "-c", WRITES, home=other)
    assert rgt("up", "local", "--name", "box", "--root", root).returncode == 0
    _run("echo", "hi")
    _approve_at_a_terminal("box")
    refused = rgt("down", "box", "--json")
    assert refused.returncode == 3
    known = _failed_checks(refused.stdout)["known"]
    assert theirs in known and f"rgt adopt box {theirs}" in known
    adopted = rgt("adopt", "box", "--json")
    assert adopted.returncode == 0, adopted.stderr
    assert [j["job_id"] for j in json.loads(adopted.stdout)["adopted"]] == [theirs]
    still = rgt("down", "box", "--json")
    assert set(_failed_checks(still.stdout)) == {"pulled", "verified", "approved"}
    assert rgt("pull", theirs, "--to", str(tmp_path / "p")).returncode == 0
    _approve_at_a_terminal("box")  # the approval before the adoption no longer counts
    released = rgt("down", "box", "--json")
    assert released.returncode == 0, released.stdout + released.stderr
