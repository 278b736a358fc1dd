"""`rgt watch` over SSH: a dropped connection is reported as unreachable, never as a dead job,
and the watch reconnects and ends with the job's real outcome."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from tests.clirun import rgt
from tests.sshd import SshServers, register

JOB = (
    "import time, pathlib, os\ntime.sleep(8)\n"
    "pathlib.Path(os.environ['RGT_OUTPUT_DIR'], 'done.json').write_text('[1]')\n"
)


def test_watch_survives_sshd_going_away(sshd_factory: SshServers, tmp_path: Path) -> None:
    server = sshd_factory()
    register(server, "box", tmp_path / "root")
    project = tmp_path / "proj"
    project.mkdir()
    (project / "job.py").write_text(JOB)
    launched = rgt("run", "box", "--probe-seconds", "1", "--json", "--", "python3", "job.py",
                   cwd=project)  # fmt: skip
    assert launched.returncode == 0, launched.stderr
    job_id = json.loads(launched.stdout)["job_id"]
    watch = subprocess.Popen(
        [sys.executable, "-m", "rgt.cli", "watch", job_id, "--interval", "0.5", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(1.5)
    server.stop()  # the listener and every live session: the connection drops
    time.sleep(4)
    assert watch.poll() is None, "watch gave up while the machine was unreachable"
    server.start()
    out, err = watch.communicate(timeout=120)
    assert watch.returncode == 0, err[-2000:]
    assert json.loads(out)["state"] == "succeeded"
