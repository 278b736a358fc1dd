"""``rgt mcp``: the verbs as MCP tools over stdio, for coding agents (Claude Code, Codex, ...).

Every tool is one ``rgt`` command run in-process with ``--json`` (``_invoke``): its input schema
comes from the tool function's type hints, its result is the command's JSON document, its error
the same ``{"error", "message", "fix", "exit_code"}`` a human sees. Every tool declares the
protocol's annotations so that a host can ask its user before anything destructive. There is
deliberately no tool for ``rgt approve`` (``release.py`` says why).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
from collections.abc import Callable
from typing import Any, NamedTuple

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, TextContent, ToolAnnotations

from rgt import __version__
from rgt.mcp import release, tools_check, tools_run

INSTRUCTIONS = (
    "rgt runs, verifies and delivers deep-learning experiments on rented GPU machines. "
    "RUN: up → audit → push → smoke → run → watch (wait_s, on a schedule) → triage a failure "
    "→ pull. VERIFY: verify_compare before you call a result real. DELIVER: deliver_record, "
    "deliver_gate. Releasing a machine (down) needs the human's approval: when down returns "
    "approval_required, ask them to run the command it names; you cannot approve."
)


class ToolKind(NamedTuple):
    read_only: bool
    destructive: bool
    idempotent: bool


READ = ToolKind(read_only=True, destructive=False, idempotent=True)
WRITE = ToolKind(read_only=False, destructive=False, idempotent=True)  # same call, same end
ACT = ToolKind(read_only=False, destructive=False, idempotent=False)  # each call starts one
DESTROY = ToolKind(read_only=False, destructive=True, idempotent=False)
STOP = ToolKind(read_only=False, destructive=True, idempotent=True)

TOOLS: dict[Callable[..., dict[str, Any]], ToolKind] = {
    tools_run.profiles: READ,
    tools_run.offers: READ,
    tools_run.up: ACT,
    tools_run.audit: READ,
    tools_run.push: WRITE,
    tools_run.smoke: ACT,
    tools_run.run: ACT,
    tools_run.status: READ,
    tools_run.logs: READ,
    tools_run.watch: READ,
    tools_run.triage: READ,
    tools_run.pull: WRITE,
    tools_run.cancel: STOP,
    release.down: DESTROY,
    tools_run.ckpt_list: READ,
    tools_check.verify_compare: READ,
    tools_check.verify_artifacts: READ,
    tools_check.verify_leakage: READ,
    tools_check.verify_selection: READ,
    tools_check.verify_collapse: READ,
    tools_check.deliver_init: WRITE,
    tools_check.deliver_record: WRITE,
    tools_check.deliver_render: WRITE,
    tools_check.deliver_reconcile: WRITE,
    tools_check.deliver_gate: WRITE,
}


def build() -> MCPServer:
    server: MCPServer = MCPServer(
        name="rgt", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING"
    )
    for fn, kind in TOOLS.items():
        server.add_tool(_compact(fn), annotations=_annotations(fn.__name__, kind))
    return server


def _compact(fn: Callable[..., dict[str, Any]]) -> Callable[..., CallToolResult]:
    """The tool with its document as compact JSON text (the SDK would indent it, a third more
    tokens for the model) beside the same document as structured content. The signature, and
    so the input and output schemas, stay ``fn``'s."""

    @functools.wraps(fn)
    def tool(*args: Any, **kwargs: Any) -> CallToolResult:
        document = fn(*args, **kwargs)
        text = json.dumps(document, separators=(",", ":"), sort_keys=True, default=str)
        return CallToolResult(
            content=[TextContent(type="text", text=text)], structured_content=document
        )

    return tool


def _annotations(name: str, kind: ToolKind) -> ToolAnnotations:
    return ToolAnnotations(
        title=name.replace("_", " "),
        read_only_hint=kind.read_only,
        destructive_hint=kind.destructive,
        idempotent_hint=kind.idempotent,
        open_world_hint=True,  # machines, vendor APIs and the user's files: never a closed world
    )


def serve() -> None:
    """Serve over stdin/stdout until the client closes the connection."""
    _leave_the_terminal()
    build().run("stdio")


def _leave_the_terminal() -> None:
    """A new session has no controlling terminal, so no prompt of an approval can reach the
    human's terminal from a tool call (the SDK also points fd 0 at /dev/null while serving, so
    ``rgt.approvals`` refuses anyway). A process group leader (started from an interactive
    shell) cannot do this, and keeps that second guard alone."""
    with contextlib.suppress(OSError):
        os.setsid()
