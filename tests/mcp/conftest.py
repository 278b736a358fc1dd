"""One `rgt mcp` server for the whole tests/mcp run (its start-up is most of a test's time):
started by the SDK's stdio client with its own RGT_HOME, working in ``root/project``.

``root`` is a private temporary directory, not pytest's ``tmp_path_factory``: pytest keeps only
the newest three ``/tmp/pytest-of-USER/pytest-N`` directories, so a second pytest run on the
machine can delete a long-lived session directory from under a running server."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.mcp.client import McpRgt


@pytest.fixture(scope="session")
def mcp_server() -> Iterator[tuple[McpRgt, Path]]:
    with tempfile.TemporaryDirectory(prefix="rgt-mcp-") as tmp:
        root = Path(tmp)
        (root / "project").mkdir()
        server = McpRgt(root / "home", root / "project")
        server.start()
        yield server, root
        server.stop()
