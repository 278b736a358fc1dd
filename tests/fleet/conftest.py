"""Two machines registered the way `rgt up ssh` does, each a real sshd on its own loopback port:
an SSH fleet of two nodes on this host (each node its own durable root, its own agent)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.clirun import rgt
from tests.sshd import SshServer, SshServers, register


@dataclass(frozen=True)
class Fleet:
    names: tuple[str, str]
    roots: tuple[Path, Path]
    servers: tuple[SshServer, SshServer]
    project: Path

    def jobs_dirs(self) -> list[list[str]]:
        """The job directories each node holds (what was started there)."""
        found = []
        for root in self.roots:
            jobs = root / ".rgt" / "jobs"
            found.append(sorted(p.name for p in jobs.iterdir()) if jobs.is_dir() else [])
        return found


@pytest.fixture
def fleet(sshd_factory: SshServers, tmp_path: Path) -> Fleet:
    servers = (sshd_factory(), sshd_factory())
    roots = (tmp_path / "root-a", tmp_path / "root-b")
    for server, name, root in zip(servers, ("a", "b"), roots, strict=True):
        register(server, name, root)
    project = tmp_path / "proj"
    project.mkdir()
    return Fleet(("a", "b"), roots, servers, project)


def status(job_id: str) -> dict[str, Any]:
    proc = rgt("status", job_id, "--json", "--full")
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc: dict[str, Any] = json.loads(proc.stdout)
    (job,) = [j for j in doc["jobs"] if j["job_id"] == job_id]
    return job


def wait_ended(job_id: str, timeout: float = 240) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        job = status(job_id)
        if job["state"] in ("succeeded", "failed", "cancelled") or time.monotonic() > deadline:
            return job
        time.sleep(1)
