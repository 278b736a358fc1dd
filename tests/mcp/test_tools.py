"""`rgt mcp` seen by the SDK's own client: every verb a tool with a valid input schema and the
protocol's annotations; no tool or parameter that could approve; bad input → the tool's error
with the CLI's `fix`, never a traceback; outputs are the CLI's `--json` documents."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from tests.mcp.client import SRC, McpRgt

VERBS = {
    "profiles", "offers", "up", "audit", "push", "fetch", "smoke", "run", "status", "logs", "watch",
    "triage", "explain", "pull", "cancel", "down", "ckpt_list",
    "verify_compare", "verify_artifacts", "verify_leakage", "verify_selection", "verify_collapse",
    "deliver_init", "deliver_record", "deliver_render", "deliver_reconcile", "deliver_gate",
}  # fmt: skip
READ_ONLY = {"profiles", "offers", "audit", "status", "logs", "watch", "triage", "ckpt_list",
             "explain"}  # fmt: skip
# Renting (a meter), running code here, writing over files, stopping or releasing.
DESTRUCTIVE = {"up", "smoke", "push", "fetch", "deliver_render", "cancel", "down"}
# Only this machine's files: nothing rented, no vendor, no network.
CLOSED_WORLD = {"profiles", "ckpt_list", "explain", "verify_compare", "verify_artifacts",
                "verify_leakage", "verify_selection", "verify_collapse", "deliver_init",
                "deliver_record", "deliver_render", "deliver_reconcile",
                "deliver_gate"}  # fmt: skip


@pytest.fixture
def server(mcp_server: tuple[McpRgt, Path]) -> tuple[McpRgt, Path]:
    return mcp_server


def test_every_verb_is_a_tool_with_a_schema_and_annotations(server: tuple[McpRgt, Path]) -> None:
    tools = {t.name: t for t in server[0].tools()}
    assert set(tools) == VERBS
    for name, tool in tools.items():
        jsonschema.Draft202012Validator.check_schema(tool.input_schema)
        assert tool.input_schema["type"] == "object"
        assert tool.description, name
        notes = tool.annotations
        assert notes is not None, name
        hints = (
            notes.read_only_hint,
            notes.destructive_hint,
            notes.idempotent_hint,
            notes.open_world_hint,
        )
        assert None not in hints, name
        assert notes.read_only_hint is (name in READ_ONLY or name.startswith("verify_")), name
        assert notes.destructive_hint is (name in DESTRUCTIVE), name
        assert notes.open_world_hint is (name not in CLOSED_WORLD), name
    assert tools["run"].input_schema["required"] == ["machine", "command"]


def test_no_tool_name_or_parameter_can_approve(server: tuple[McpRgt, Path]) -> None:
    words = ("approv", "pin", "consent", "yes", "confirm", "force", "abandon")
    for tool in server[0].tools():
        names = [tool.name, *tool.input_schema.get("properties", {})]
        assert not [n for n in names if any(w in n.lower() for w in words)], tool.name


def test_status_is_the_cli_document(server: tuple[McpRgt, Path]) -> None:
    client, root = server
    answer = client.call("up", {"profile": "local", "name": "solo", "root": str(root / "d")})
    assert not answer.is_error, answer.text
    assert client.call("status").data == cli(root, "status")


def test_unknown_job_and_machine_are_tool_errors_with_the_fix(
    server: tuple[McpRgt, Path],
) -> None:
    client, root = server
    for tool, args in (("logs", {"job_id": "nope"}), ("cancel", {"job_id": "nope"})):
        answer = client.call(tool, args)
        assert answer.is_error and answer.data["error"] == "UnknownJobError"
        assert answer.data["fix"] and answer.data["exit_code"] == 2
    answer = client.call("audit", {"name": "ghost"})
    assert answer.is_error and answer.data["error"] == "UnknownMachineError"
    assert answer.data["fix"] == cli(root, "audit", "ghost")["fix"]


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("run", {"machine": "solo", "command": "python train.py"}),  # a string, not a list
        ("run", {"machine": "solo"}),  # the command is missing
        ("watch", {"wait_s": "soon"}),
        ("status", {"target": 5}),
        ("down", {}),
        ("no_such_tool", {}),
    ],
)
def test_malformed_arguments_are_the_tools_error_not_a_traceback(
    server: tuple[McpRgt, Path], tool: str, arguments: dict[str, Any]
) -> None:
    answer = server[0].call(tool, arguments)
    assert answer.is_error
    assert "Traceback" not in answer.text and 'File "' not in answer.text


def test_down_of_an_unknown_machine_is_refused_with_its_fix(server: tuple[McpRgt, Path]) -> None:
    answer = server[0].call("down", {"name": "ghost"})
    assert answer.is_error and answer.data["fix"] and answer.data["exit_code"] == 2


def cli(root: Path, *args: str) -> Any:
    env = {**os.environ, "RGT_HOME": str(root / "home"), "PYTHONPATH": SRC}
    proc = subprocess.run(
        [sys.executable, "-m", "rgt.cli", *args, "--json"],
        capture_output=True,
        text=True,
        env=env,
        cwd=root,
        stdin=subprocess.DEVNULL,
        timeout=120,
    )
    return json.loads(proc.stdout)


HOLD = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
time.sleep(1.5)
conn.execute("ROLLBACK")
"""


@pytest.mark.slow  # > 1 s on two cores
def test_a_call_waits_for_another_process_writing_the_store(server: tuple[McpRgt, Path]) -> None:
    client, root = server
    assert not client.call("status").is_error  # the store exists
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(root / "home" / "state.db")],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
    began = time.monotonic()
    answer = client.call("up", {"profile": "local", "name": "later", "root": str(root / "l")})
    waited = time.monotonic() - began
    assert holder.wait(30) == 0
    assert not answer.is_error, answer.text
    assert waited >= 1.0, answer.text
