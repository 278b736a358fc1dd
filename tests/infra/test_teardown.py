"""The multi-node fixtures leave nothing behind, also when a test fails: a pytest run of its own
starts both (two-node Slurm, two sshd nodes), leaves a 2-node Slurm job and a command on each
ssh node running, and fails on purpose; afterwards no daemon, job process, namespace, veth or
bridge of that run is left."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.netns_nodes import ip
from tests.slurm import _skip_reason

FAILING = """
import json, os, subprocess, time
from pathlib import Path


SLEEPS = "(/usr/bin/)?sleep 8639[78]"  # Slurm runs the command by its full path


def running(marker):
    out = subprocess.run(["pgrep", "-xf", marker], capture_output=True, text=True).stdout
    return [int(pid) for pid in out.split()]


def test_fails_with_everything_running(slurm_two_nodes, ssh_two_nodes):
    job = ("--nodes", "2", "--output", "/dev/null", "--wrap", "srun sleep 86397")  # no slurm-N.out
    slurm_two_nodes.run("sbatch", *job)
    for index in range(2):
        subprocess.Popen(ssh_two_nodes.ssh(index, "sleep 86398"), stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while len(running(SLEEPS)) < 4 and time.monotonic() < deadline:
        time.sleep(0.3)
    networks = [slurm_two_nodes.network, ssh_two_nodes.network]
    Path(os.environ["INFRA_RECORD"]).write_text(json.dumps({
        "sleeps": running(SLEEPS),
        "spool": str(slurm_two_nodes.spool),
        "seen": subprocess.run(["pgrep", "-af", "8639"], capture_output=True, text=True).stdout,
        "queue": slurm_two_nodes.run("squeue", "-o", "%i %T %R", check=False),
        "netns": [node.netns for net in networks for node in net.nodes],
        "links": [net.bridge for net in networks],
    }))
    assert False, "failing on purpose with everything running"
"""


def alive(marker: str) -> list[str]:
    out = subprocess.run(["pgrep", "-af", marker], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if "pgrep" not in line]


@pytest.mark.slow
def test_a_failed_test_leaves_no_daemon_job_namespace_or_link(tmp_path: Path) -> None:
    if _skip_reason() or os.geteuid() != 0:
        pytest.skip(_skip_reason() or "needs root")
    (tmp_path / "test_fails_on_purpose.py").write_text(FAILING)
    record, base = tmp_path / "record.json", tmp_path / "inner"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "tests.conftest",
         "-c", "pyproject.toml", "-n", "0", "-q", f"--basetemp={base}",
         str(tmp_path / "test_fails_on_purpose.py")],
        capture_output=True, text=True, timeout=300, cwd=Path(__file__).parents[2],
        env={**os.environ, "INFRA_RECORD": str(record)},
    )  # fmt: skip
    assert proc.returncode == 1 and "failing on purpose" in proc.stdout, proc.stdout[-3000:]
    made = json.loads(record.read_text())
    assert len(made["sleeps"]) == 4 and len(made["netns"]) == 4, made["seen"] + made["queue"]
    assert alive("8639[78]") == [] and alive(str(base)) == []  # not even srun or ssh
    assert alive(made["spool"]) == [] and not Path(made["spool"]).exists()  # munged, spool
    assert not set(made["netns"]) & set(ip("netns", "list").stdout.split())
    links = ip("-o", "link").stdout
    assert not [name for name in made["links"] if f" {name}:" in links or f" {name}@" in links]
