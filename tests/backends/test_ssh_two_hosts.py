"""Two machines, two jobs: a second sshd in its own network namespace is a separate host
(its own address on a veth pair), driven through the real CLI like a user would."""

from __future__ import annotations

import json
import os
import random
import subprocess
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest

from tests import clirun
from tests.sshd import SshServer, SshServers

JOB = """
import json, os, pathlib
out = pathlib.Path(os.environ["RGT_OUTPUT_DIR"])
(out / "where.json").write_text(json.dumps({"netns": os.readlink("/proc/self/ns/net")}))
print("ran on", os.environ["RGT_JOB_ID"], flush=True)
"""


def ip(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["ip", *args], capture_output=True, check=False, timeout=30)


@pytest.fixture
def far_server(sshd_factory: SshServers) -> Iterator[SshServer]:
    """sshd at 10.213.X.2 inside namespace rgt-N, reached over a veth pair from 10.213.X.1."""
    tag = f"{random.randrange(16**6):06x}"
    ns, outside, inside = f"rgt-{tag}", f"rgt{tag}a", f"rgt{tag}b"
    subnet = f"10.213.{random.randrange(1, 250)}"
    if os.geteuid() != 0 or ip("netns", "add", ns).returncode != 0:
        pytest.skip("network namespaces need root and `ip netns` (iproute2)")
    try:
        steps = [
            ("link", "add", outside, "type", "veth", "peer", "name", inside),
            ("link", "set", inside, "netns", ns),
            ("addr", "add", f"{subnet}.1/30", "dev", outside),
            ("link", "set", outside, "up"),
            ("netns", "exec", ns, "ip", "addr", "add", f"{subnet}.2/30", "dev", inside),
            ("netns", "exec", ns, "ip", "link", "set", inside, "up"),
            ("netns", "exec", ns, "ip", "link", "set", "lo", "up"),
        ]
        for step in steps:
            assert ip(*step).returncode == 0, step
        server = sshd_factory(netns=ns, address=f"{subnet}.2")
        yield server
        server.stop()
    finally:
        ip("netns", "del", ns)
        ip("link", "del", outside)


rgt = partial(clirun.rgt, timeout=180)


def test_two_hosts_two_jobs_one_status(
    sshd_server: SshServer, far_server: SshServer, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "job.py").write_text(JOB)
    jobs = {}
    for name, server in (("near", sshd_server), ("far", far_server)):
        up = rgt(
            "up",
            "generic-ssh",
            "--name",
            name,
            "--ssh",
            server.ssh_line,
            "--root",
            str(tmp_path / name),
            "--json",
        )
        assert up.returncode == 0, up.stderr
        run = rgt(
            "run", name, "--probe-seconds", "1", "--json", "--", "python3", "job.py", cwd=project
        )
        assert run.returncode == 0, run.stderr
        jobs[name] = json.loads(run.stdout)["job_id"]
    for job_id in jobs.values():
        watched = rgt("watch", job_id, "--interval", "0.3", "--json")
        assert watched.returncode == 0, watched.stderr
    status = json.loads(rgt("status", "--json").stdout)
    assert {m["name"] for m in status["machines"]} == {"near", "far"}
    rows = {j["machine"]: j for j in status["jobs"]}
    assert {m: rows[m]["job_id"] for m in rows} == jobs
    assert {rows[m]["state"] for m in rows} == {"succeeded"}
    seen = {
        name: json.loads(
            (tmp_path / name / ".rgt/jobs" / job_id / "outputs/where.json").read_text()
        )["netns"]
        for name, job_id in jobs.items()
    }
    assert seen["near"] == os.readlink("/proc/self/ns/net")
    assert seen["far"] != seen["near"]  # the far job ran inside the other host's network
