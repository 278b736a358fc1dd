"""``rgt mcp``: the verbs as MCP tools over stdio, for coding agents (Claude Code, Codex, ...).

Every tool is one ``rgt`` command: it calls the library function that command's CLI body calls
(``rgt.verbs`` and below, ``_call``); no tool runs the click app. Its input schema comes from
the tool function's type hints (``schema``), its result is the command's JSON document, its
error the same ``{"error", "message", "fix", "exit_code"}`` a human sees; either is cut to the
server's result limit (``bounded``, 64 KB by default). Every tool declares the
protocol's annotations so that a host can ask its user before anything destructive (renting,
running code here, writing over files) or anything that reaches beyond this machine. There
is deliberately no tool for ``rgt approve`` (``release.py`` says why).

The protocol is spoken here with the standard library (``wire``, ``protocol``), not with the
official SDK: importing the SDK's server alone takes 2 s or more, four times the start-up an
agent host should wait for; the SDK's own client drives this server in the tests.
"""

from __future__ import annotations

import contextlib
import inspect
import os
from collections.abc import Callable
from typing import Any, NamedTuple

from rgt import __version__
from rgt.mcp import release, tools_check, tools_explain, tools_run
from rgt.mcp.bounded import DEFAULT_MAX_BYTES
from rgt.mcp.protocol import Session, Tool
from rgt.mcp.schema import input_schema
from rgt.mcp.wire import claim_stdio

INSTRUCTIONS = (
    "rgt runs, verifies and delivers deep-learning experiments on rented GPU machines. "
    "RUN: up → audit → push → smoke → run → watch (wait_s, on a schedule) → triage a failure "
    "→ pull. VERIFY: verify_compare before you call a result real. DELIVER: deliver_record, "
    "deliver_gate. Releasing a machine (down) needs the human's approval: when down returns "
    "approval_required, ask them to run the command it names; you cannot approve."
)


class ToolKind(NamedTuple):
    """The protocol's hints (spec: server/tools, ToolAnnotations). ``open_world``: the tool
    reaches beyond this machine's files (a rented machine, a vendor API, the internet);
    ``destructive``: it may overwrite or remove something, spend money, or run code with the
    user's rights, so a host should ask first."""

    read_only: bool
    destructive: bool
    idempotent: bool
    open_world: bool = True


READ = ToolKind(read_only=True, destructive=False, idempotent=True)
READ_HERE = ToolKind(read_only=True, destructive=False, idempotent=True, open_world=False)
WRITE = ToolKind(read_only=False, destructive=False, idempotent=True)  # same call, same end
WRITE_HERE = WRITE._replace(open_world=False)  # adds to this machine's files, never replaces
ACT = ToolKind(read_only=False, destructive=False, idempotent=False)  # each call starts one
DESTROY = ToolKind(read_only=False, destructive=True, idempotent=False)
STOP = ToolKind(read_only=False, destructive=True, idempotent=True)
# `up` rents a machine: a meter runs until a human releases it (money is destroyed).
RENT = DESTROY
# `smoke` runs the given command on THIS machine with the user's rights.
RUN_HERE = DESTROY
# `push` and `fetch` write over files at their destination on the machine.
OVERWRITE = STOP
# `deliver_render` writes its output at any local path the caller names, over what is there.
OVERWRITE_HERE = STOP._replace(open_world=False)

TOOLS: dict[Callable[..., dict[str, Any]], ToolKind] = {
    tools_run.profiles: READ_HERE,
    tools_run.offers: READ,
    tools_run.up: RENT,
    tools_run.audit: READ,
    tools_run.push: OVERWRITE,
    tools_run.fetch: OVERWRITE,
    tools_run.smoke: RUN_HERE,
    tools_run.run: ACT,
    tools_run.status: READ,
    tools_run.logs: READ,
    tools_run.watch: READ,
    tools_run.triage: READ,
    tools_explain.explain: READ_HERE,
    tools_run.pull: WRITE,
    tools_run.cancel: STOP,
    release.down: DESTROY,
    tools_run.ckpt_list: READ_HERE,
    tools_check.verify_compare: READ_HERE,
    tools_check.verify_artifacts: READ_HERE,
    tools_check.verify_leakage: READ_HERE,
    tools_check.verify_selection: READ_HERE,
    tools_check.verify_collapse: READ_HERE,
    tools_check.deliver_init: WRITE_HERE,
    tools_check.deliver_record: WRITE_HERE,
    tools_check.deliver_render: OVERWRITE_HERE,
    tools_check.deliver_reconcile: WRITE_HERE,
    tools_check.deliver_gate: WRITE_HERE,
}


def build() -> dict[str, Tool]:
    """Every tool by name, as ``tools/list`` lists it."""
    return {fn.__name__: Tool(fn, _listing(fn, kind)) for fn, kind in TOOLS.items()}


def _listing(fn: Callable[..., dict[str, Any]], kind: ToolKind) -> dict[str, Any]:
    name = fn.__name__
    return {
        "name": name,
        "description": inspect.cleandoc(fn.__doc__ or name),
        "inputSchema": input_schema(fn),
        "outputSchema": {"type": "object", "additionalProperties": True},
        "annotations": {
            "title": name.replace("_", " "),
            "readOnlyHint": kind.read_only,
            "destructiveHint": kind.destructive,
            "idempotentHint": kind.idempotent,
            "openWorldHint": kind.open_world,
        },
    }


def serve(max_result: int = DEFAULT_MAX_BYTES) -> None:
    """Serve over stdin/stdout until the client closes the connection; every tool result
    within ``max_result`` bytes on the wire (``bounded``)."""
    _leave_the_terminal()
    info = {"name": "rgt", "version": __version__}
    Session(claim_stdio(), build(), info, INSTRUCTIONS, max_result).run()


def _leave_the_terminal() -> None:
    """A new session has no controlling terminal, so no prompt of an approval can reach the
    human's terminal from a tool call (the wire also points fd 0 at /dev/null while serving, so
    ``rgt.lifecycle.approvals`` refuses anyway). A process group leader (started from an interactive
    shell) cannot do this, and keeps that second guard alone."""
    with contextlib.suppress(OSError):
        os.setsid()
