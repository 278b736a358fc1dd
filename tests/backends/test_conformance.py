"""The conformance lifecycle on every backend that can run here: local and ssh (real sshd)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rgt.backends import get_backend
from rgt.backends.base import Backend
from rgt.machines import register_local
from rgt.state.store import Store
from tests.backends.conformance import run_lifecycle, write_project
from tests.sshd import SshServer, register

HOSTILE_ROOT = "root 'q' $(touch PWNED) ü"


@pytest.fixture(params=["local", "ssh"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    root = tmp_path / HOSTILE_ROOT
    if request.param == "local":
        machine = register_local(Store.open(), "here", root).machine
    else:
        server: SshServer = request.getfixturevalue("sshd_server")
        machine = register(server, "box", root)
    return get_backend(machine)


def test_job_lifecycle(backend: Backend, tmp_path: Path) -> None:
    project = write_project(tmp_path / "project")
    run_lifecycle(backend, project, tmp_path / "fetched", job_id=f"conf-{backend.kind}-1")
