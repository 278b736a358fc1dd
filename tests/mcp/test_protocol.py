"""The protocol itself, as MCP's spec and the SDK's own client see it: the lifecycle, ping,
tools/list, tools/call and JSON-RPC errors. The SDK's client drives the shared server; a raw
newline-delimited JSON-RPC client drives a second one started with the SDK made unimportable,
so the server provably needs nothing but the standard library."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp.types import TextContent

from tests.mcp.client import SRC, McpRgt

BLOCKED = "import sys; sys.modules['mcp'] = None; from rgt.cli import main; main(['mcp'])"


def test_the_sdk_client_initializes_pings_lists_and_calls(
    mcp_server: tuple[McpRgt, Path],
) -> None:
    client, _ = mcp_server
    assert client.session is not None
    init = client._wait(client.session.initialize())  # the cached answer of the handshake
    assert init.protocol_version == "2025-11-25" and init.server_info.name == "rgt"
    assert init.capabilities.tools is not None and init.instructions
    client._wait(client.session.send_ping())
    listed = {t.name: t for t in client.tools()}
    assert listed["status"].output_schema == {"type": "object", "additionalProperties": True}
    answer = client.call("profiles", {"name": "local"})
    assert not answer.is_error and answer.data["name"] == "local"
    assert json.loads(answer.text) == answer.data  # the text is the same document, compact


def test_the_sdk_client_sees_tool_errors_it_can_correct(mcp_server: tuple[McpRgt, Path]) -> None:
    client, _ = mcp_server
    assert client.session is not None
    unknown = client._wait(client.session.call_tool("no_such_tool", {}))
    assert unknown.is_error and "Unknown tool: no_such_tool" in _text(unknown.content)
    bad = client.call("watch", {"wait_s": "soon", "target": 5, "wait": 3})
    assert bad.is_error
    for fault in ("wait_s: expected number", "target: expected string or null", "unknown"):
        assert fault in bad.text, bad.text
    coerced = client.call("status", {"target": None})  # null is a valid optional
    assert not coerced.is_error, coerced.text


def _text(content: list[Any]) -> str:
    return "\n".join(c.text for c in content if isinstance(c, TextContent))


class Raw:
    """`rgt mcp` over pipes, one JSON-RPC message a line each way."""

    def __init__(self, home: Path) -> None:
        env = {**os.environ, "RGT_HOME": str(home), "PYTHONPATH": SRC}
        self.proc = subprocess.Popen(
            [sys.executable, "-c", BLOCKED],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )

    def send(self, message: object) -> None:
        line = message if isinstance(message, str) else json.dumps(message)
        assert self.proc.stdin is not None
        self.proc.stdin.write(line.encode() + b"\n")
        self.proc.stdin.flush()

    def request(self, msg_id: int, method: str, params: object = None) -> dict[str, Any]:
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": msg_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        return self.read()

    def read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        answer = json.loads(self.proc.stdout.readline())
        assert isinstance(answer, dict) and answer["jsonrpc"] == "2.0"
        return answer


@pytest.fixture(scope="module")
def raw() -> Iterator[Raw]:
    with tempfile.TemporaryDirectory(prefix="rgt-mcp-raw-") as tmp:
        server = Raw(Path(tmp))
        yield server
        assert server.proc.stdin is not None
        server.proc.stdin.close()  # the end of stdin ends the server (spec: stdio shutdown)
        assert server.proc.wait(30) == 0
        assert server.proc.stdout is not None and server.proc.stdout.read() == b""


def code(answer: dict[str, Any]) -> int:
    return int(answer["error"]["code"])


def test_the_lifecycle_and_json_rpc_errors_over_raw_pipes(raw: Raw) -> None:
    assert raw.request(1, "ping") == {"jsonrpc": "2.0", "id": 1, "result": {}}
    assert code(raw.request(2, "tools/list")) == -32600  # before initialize
    raw.send("{not json")
    parse_error = raw.read()
    assert parse_error["id"] is None and code(parse_error) == -32700
    old = raw.request(3, "initialize", {"protocolVersion": "2025-03-26", "capabilities": {}})
    assert old["result"]["protocolVersion"] == "2025-03-26"  # a version it speaks: the same
    new = raw.request(4, "initialize", {"protocolVersion": "2099-01-01", "capabilities": {}})
    assert new["result"]["protocolVersion"] == "2025-11-25"  # else its newest
    assert new["result"]["capabilities"] == {"tools": {"listChanged": False}}
    raw.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    raw.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 99}})
    raw.send({"jsonrpc": "2.0", "method": "notifications/whatever"})
    assert code(raw.request(5, "resources/list")) == -32601
    assert code(raw.request(6, "tools/call", {"arguments": {}})) == -32602  # no name
    assert code(raw.request(7, "tools/call", [1, 2])) == -32602  # params not an object
    raw.send('[{"jsonrpc": "2.0", "id": 8, "method": "ping"}]')  # a batch: not since 2025-06-18
    assert code(raw.read()) == -32600
    raw.send({"jsonrpc": "1.0", "id": 9, "method": "ping"})
    assert raw.read()["error"]["code"] == -32600
    tools = raw.request(10, "tools/list")["result"]["tools"]
    assert len(tools) == 27 and all(t["inputSchema"]["type"] == "object" for t in tools)


def test_a_tool_call_over_raw_pipes_carries_only_protocol_on_stdout(raw: Raw) -> None:
    # Its own handshake: under xdist this test may get a server the test above never saw.
    raw.request(19, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {}})
    raw.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    answer = raw.request(20, "tools/call", {"name": "status", "arguments": {}})["result"]
    assert (
        answer["isError"] is False
        and json.loads(answer["content"][0]["text"]) == (answer["structuredContent"])
    )
    failed = raw.request(21, "tools/call", {"name": "audit", "arguments": {"name": "ghost"}})
    document = json.loads(failed["result"]["content"][0]["text"])
    assert failed["result"]["isError"] and document["error"] == "UnknownMachineError"
    assert document["fix"]
