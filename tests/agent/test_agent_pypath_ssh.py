"""Over a real sshd: a job whose Python has no rgt installed imports ``rgt.ckpt`` from the agent
archive the machine holds, found LAST on its sys.path (so nothing installed was shadowed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.clirun import ok, rgt
from tests.sshd import SshServer

pytestmark = pytest.mark.slow

JOB = (
    "import sys, rgt, rgt.ckpt; from rgt.ckpt import Checkpointer; "
    "print('ckpt', rgt.ckpt.__file__); print('last', sys.path[-1]); "
    "print('exe', sys.executable)"
)


def test_import_rgt_ckpt_works_in_a_job_without_rgt(sshd_server: SshServer, tmp_path: Path) -> None:
    root = tmp_path / "durable"
    ok(rgt("up", "generic-ssh", "--name", "box", "--ssh", sshd_server.ssh_line,
           "--root", str(root), "--json"))  # fmt: skip
    project = tmp_path / "project"
    project.mkdir()
    launched = rgt("run", "box", "--probe-seconds", "0", "--json", "--", "python3", "-c", JOB,
                   cwd=project)  # fmt: skip
    job_id = json.loads(launched.stdout)["job_id"]
    assert ok(rgt("watch", job_id, "--json"))["state"] == "succeeded"
    log = (root / ".rgt" / "jobs" / job_id / "logs" / "attempt-1.log").read_text()
    lines = dict(line.split(" ", 1) for line in log.splitlines() if " " in line)
    archive = lines["last"]
    agent_dir = str(root / ".rgt" / "agent") + "/agent-"
    assert archive.startswith(agent_dir) and archive.endswith(".pyz"), log
    assert lines["ckpt"] == f"{archive}/rgt/ckpt/__init__.py", log  # only the archive had it
    assert "/.venv/" not in lines["exe"]  # the machine's own python3, not this test's venv
