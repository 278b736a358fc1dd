"""The catalog over MCP: the `explain` tool, driven by the SDK's own client against a real
`rgt mcp` server."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.mcp.client import McpRgt


@pytest.fixture(scope="module")
def server() -> Iterator[McpRgt]:
    with tempfile.TemporaryDirectory(prefix="rgt-mcp-explain-") as tmp:
        (Path(tmp) / "project").mkdir()
        mcp = McpRgt(Path(tmp) / "home", Path(tmp) / "project")
        mcp.start()
        yield mcp
        mcp.stop()


@pytest.mark.slow
def test_the_explain_tool_reads_an_entry_lists_them_and_names_the_closest(
    server: McpRgt,
) -> None:
    (tool,) = [t for t in server.tools() if t.name == "explain"]
    assert tool.annotations is not None and tool.annotations.read_only_hint
    assert tool.annotations.open_world_hint is False  # this machine's files only

    entry = server.call("explain", {"topic": "cuda_oom"})
    assert not entry.is_error and entry.data["kind"] == "label"
    assert "## Fixes, in order of cost" in entry.data["body"] and entry.data["sources"]

    listing = server.call("explain", {"list_all": True})
    assert listing.data["count"] >= 60
    assert "oom-ladder" in {e["id"] for e in listing.data["entries"]}

    unknown = server.call("explain", {"topic": "cuda_om"})
    assert unknown.is_error and unknown.data["exit_code"] == 2
    assert unknown.data["suggestions"][0] == "cuda_oom"
