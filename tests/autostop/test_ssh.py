"""Autostop over the ssh backend (a real sshd on 127.0.0.1), with a user profile whose stop
action records that it ran and whose survival matrix the test chooses: results on a tier the
stop wipes, directly or through a link, block the stop."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.autostop.helpers import (
    arm,
    events,
    kinds,
    project,
    recorder,
    run_job,
    stops,
    user_profile,
    wait_ended,
    wait_for,
)
from tests.clirun import rgt
from tests.sshd import SshServer

SCRIPT = (
    "import os, sys\n"
    "open('out.txt', 'w').write('result')\n"
    "if len(sys.argv) > 1:\n"
    "    open(sys.argv[1], 'w').write('on scratch')\n"
    "    os.symlink(sys.argv[1], 'linked.txt')\n"
)


def _machine(rgt_home: Path, tmp_path: Path, sshd: SshServer, durable_survives: bool) -> tuple:
    root, scratch, record = tmp_path / "disk" / "root", tmp_path / "scratch", tmp_path / "STOP"
    scratch.mkdir()
    tiers = [("disk", tmp_path / "disk", durable_survives), ("scratch", scratch, False)]
    name = user_profile(rgt_home, "recorded", tiers, recorder(record))
    up = rgt("up", name, "--name", "gpu", "--ssh", sshd.ssh_line, "--root", str(root))
    assert up.returncode == 0, up.stderr
    return root, scratch, record


@pytest.mark.slow
def test_fires_over_ssh_after_the_job_ended_and_verified(
    rgt_home: Path, tmp_path: Path, sshd_server: SshServer
) -> None:
    root, _scratch, record = _machine(rgt_home, tmp_path, sshd_server, True)
    job = run_job("gpu", project(tmp_path, SCRIPT), "python3", "train.py")
    assert wait_ended("gpu", job) == "succeeded"
    code, seen = arm("gpu", "--after-jobs")
    assert code == 0, seen
    assert "profile recorded" in seen  # the stop comes from the profile's [self_stop]
    assert wait_for(lambda: stops(record), 30), kinds(root)
    assert kinds(root).count("autostop_fired") == 1


@pytest.mark.slow
@pytest.mark.parametrize("where", ["linked", "root"])
def test_results_on_storage_the_stop_wipes_block_it(
    rgt_home: Path, tmp_path: Path, sshd_server: SshServer, where: str
) -> None:
    root, scratch, record = _machine(rgt_home, tmp_path, sshd_server, where == "linked")
    args = ("python3", "train.py", str(scratch / "big.txt")) if where == "linked" else ()
    job = run_job("gpu", project(tmp_path, SCRIPT), *(args or ("python3", "train.py")))
    assert wait_ended("gpu", job) == "succeeded"
    assert arm("gpu")[0] == 0
    found = wait_for(lambda: [e for e in events(root) if e["kind"] == "autostop_blocked"], 30)
    assert found, kinds(root)
    reason = found[0]["detail"]["reason"]
    assert "is lost at the stop" in reason, reason
    assert ("linked.txt" in reason) if where == "linked" else ("disk" in reason)
    assert stops(record) == []


@pytest.mark.slow
def test_a_tmux_platform_arms_again_and_fires_once(
    rgt_home: Path, tmp_path: Path, sshd_server: SshServer
) -> None:
    """AutoDL-like: the agent and the watcher start inside tmux; arming again starts a second
    watcher in a session of its own, which takes over."""
    root, record = tmp_path / "disk" / "root", tmp_path / "STOP"
    tiers = [("disk", tmp_path / "disk", True)]
    name = user_profile(rgt_home, "tmuxbox", tiers, recorder(record), detach="tmux")
    up = rgt("up", name, "--name", "gpu", "--ssh", sshd_server.ssh_line, "--root", str(root))
    assert up.returncode == 0, up.stderr
    job = run_job("gpu", project(tmp_path, "import time\ntime.sleep(8)\n"), "python3", "train.py")
    assert arm("gpu")[0] == 0
    code, seen = arm("gpu", "--after-jobs")
    assert code == 0, seen
    assert wait_ended("gpu", job) == "succeeded"
    assert wait_for(lambda: stops(record), 30), kinds(root)
    assert len(stops(record)) == 1
