"""The machine's sshd dies at a seeded moment of `rgt run` over SSH (the listener and every
session: a network drop), then comes back.

Whatever step the launch was in (snapshot upload, agent install, spec, agent start, the
probe), the trial asserts: `rgt run` ends, with the job id or a clear error, never a hang; once
the machine is back, `rgt status` reads it (a cut agent or spec installed by a transfer that
ended early would break every later call); a job that was launched ends `succeeded`; and a new
`rgt run` on the same machine runs to success.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.faults.harness import Outcome, assert_clear_error, rgt, rng, start
from tests.sshd import SshServers, register

JOB = (
    "import os, pathlib, time\ntime.sleep(1)\n"
    "pathlib.Path(os.environ['RGT_OUTPUT_DIR'], 'done.txt').write_text('ok')\n"
)
LAUNCH_BOUND_S = 90.0  # a launch retries its ssh calls with backoff before it gives up


def _project(root: Path) -> Path:
    root.mkdir()
    (root / "job.py").write_text(JOB)
    return root


def _follow(home: Path, job_id: str) -> str:
    """The job's end as `rgt watch` reports it (its whole answer when not a success)."""
    watched = rgt(home, "watch", job_id, "--interval", "0.3", "--json", bound=60)
    state = str((watched.doc() or {}).get("state"))
    return state if state == "succeeded" else f"{state}: {watched}"


@pytest.mark.parametrize("i", range(8))
def test_sshd_dies_during_ssh_run(sshd_factory: SshServers, tmp_path: Path, i: int) -> None:
    home = Path(os.environ["RGT_HOME"])
    server = sshd_factory()
    register(server, "box", tmp_path / "machine root")
    project = _project(tmp_path / "project")
    run = ("run", "box", "--probe-seconds", "1", "--json", "--", "python3", "job.py")

    cli = start(home, *run, cwd=project)
    try:
        time.sleep(rng("sshd-dies-during-run", i).uniform(0.0, 0.9))
        server.stop()  # mid-launch, mid-probe, or after `rgt run` has already returned
        ended = cli.finish(LAUNCH_BOUND_S)
        out, err = cli.output()
    finally:
        cli.close()
    assert ended, f"hang: `rgt run` gave no answer within {LAUNCH_BOUND_S:g}s\n{err[-1500:]}"
    server.start()

    status = rgt(home, "status", "--json", bound=60)
    assert status.code == 0, f"the machine cannot be read after the drop:\n{status}"
    if cli.returncode != 0:
        assert_clear_error(Outcome(run, int(cli.returncode or -1), out, err, 0.0))
    for job in status.doc()["jobs"]:
        # An agent that started runs the job to its end through the drop; a launch cut before
        # the agent started never runs (queued, or failed as never launched).
        if cli.returncode == 0 or job["state"] not in ("queued", "failed"):
            followed = _follow(home, job["job_id"])
            assert followed == "succeeded", followed

    again = rgt(home, *run, cwd=project, bound=LAUNCH_BOUND_S)
    assert again.code == 0, f"the machine is unusable after the drop:\n{again}"
    assert _follow(home, again.doc()["job_id"]) == "succeeded"
