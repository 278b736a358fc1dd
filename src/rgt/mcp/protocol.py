"""The server side of an MCP session: lifecycle, ``ping``, ``tools/list`` and ``tools/call``.

Lifecycle (spec: basic/lifecycle): the client's ``initialize`` names the protocol version it
wants; the server answers with that version when it speaks it, else with its newest, plus its
capabilities (tools only) and its ``serverInfo``; the client then sends
``notifications/initialized``. Before ``initialize`` only ``ping`` is served. Tool calls run
each on a thread of their own (the commands themselves run one at a time, ``_invoke``), so a
``ping`` or a ``tools/list`` is answered while a ``watch`` waits. A ``notifications/cancelled``
drops the answer of the call it names (spec: utilities/cancellation); the command it started
is not interrupted, as it was not under the SDK. Errors (spec: server/tools): a protocol fault
is a JSON-RPC error; a fault of the tool call itself (an unknown tool, arguments that do not fit
the schema, a command that failed) is a result with ``isError``, which the model can read and
correct.
"""

from __future__ import annotations

import shlex
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from rgt import clip
from rgt.mcp import _invoke, bounded
from rgt.mcp import wire as w
from rgt.mcp._invoke import CommandFailed
from rgt.mcp.schema import BadArguments, check

PROTOCOL_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")  # oldest first

Handler = Callable[[dict[str, Any]], dict[str, Any]]


@dataclass(frozen=True)
class Tool:
    """What ``tools/list`` says of a tool, and the function a call runs."""

    fn: Callable[..., dict[str, Any]]
    listing: dict[str, Any]


class Session:
    """One client over one wire, from ``initialize`` to the end of stdin."""

    def __init__(
        self,
        wire: w.Wire,
        tools: Mapping[str, Tool],
        info: dict[str, Any],
        instructions: str,
        max_result: int = bounded.DEFAULT_MAX_BYTES,
    ) -> None:
        self.wire = wire
        self.max_result = max_result
        self.tools = tools
        self.info = info
        self.instructions = instructions
        self.initialized = False
        self._cancelled: set[str | int] = set()
        self._lock = threading.Lock()

    def run(self) -> None:
        for message in self.wire.messages():
            if isinstance(message, w.Malformed):
                self.wire.error(message.id, message.code, message.message)
            elif "method" not in message:
                continue  # a response: this server sends no requests, so nothing awaits one
            elif "id" not in message:
                self.notified(message["method"], message.get("params"))
            else:
                self.requested(message["id"], message["method"], message.get("params"))

    def notified(self, method: str, params: object) -> None:
        """Notifications get no answer, whatever they hold."""
        if method == "notifications/cancelled" and isinstance(params, dict):
            request = params.get("requestId")
            if isinstance(request, (str, int)):
                with self._lock:
                    self._cancelled.add(request)

    def requested(self, msg_id: str | int, method: str, params: object) -> None:
        if params is not None and not isinstance(params, dict):
            self.wire.error(msg_id, w.INVALID_PARAMS, "Invalid params: params must be an object")
            return
        handler = self._handler(method)
        if handler is None:
            self.wire.error(msg_id, w.METHOD_NOT_FOUND, "Method not found", method)
        elif not self.initialized and method not in ("initialize", "ping"):
            self.wire.error(msg_id, w.INVALID_REQUEST, "Invalid Request: initialize first")
        elif method == "tools/call":
            args = (msg_id, handler, params or {})
            threading.Thread(target=self._answer, args=args, daemon=True).start()
        else:
            self._answer(msg_id, handler, params or {})

    def _handler(self, method: str) -> Handler | None:
        handlers: dict[str, Handler] = {
            "initialize": self.initialize,
            "ping": lambda params: {},
            "tools/list": lambda params: {"tools": [t.listing for t in self.tools.values()]},
            "tools/call": self.call,
        }
        return handlers.get(method)

    def _answer(self, msg_id: str | int, handler: Handler, params: dict[str, Any]) -> None:
        try:
            result = handler(params)
        except BadArguments as exc:
            self.wire.error(msg_id, w.INVALID_PARAMS, f"Invalid params: {exc}")
            return
        except Exception as exc:  # a bug here must cost one answer, never the session
            said = clip.text(f"{type(exc).__name__}: {exc}", 2048)
            self.wire.error(msg_id, w.INTERNAL_ERROR, said)
            return
        with self._lock:
            if msg_id in self._cancelled:
                self._cancelled.discard(msg_id)
                return
        self.wire.answer(msg_id, result)

    def initialize(self, params: dict[str, Any]) -> dict[str, Any]:
        wanted = params.get("protocolVersion")
        if not isinstance(wanted, str):
            raise BadArguments("initialize needs protocolVersion, a string")
        self.initialized = True
        return {
            "protocolVersion": wanted if wanted in PROTOCOL_VERSIONS else PROTOCOL_VERSIONS[-1],
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": self.info,
            "instructions": self.instructions,
        }

    def call(self, params: dict[str, Any]) -> dict[str, Any]:
        name = params.get("name")
        if not isinstance(name, str):
            raise BadArguments("tools/call needs name, a string")
        tool = self.tools.get(name)
        if tool is None:
            unknown = clip.text(name, 256)
            return failure(f"Unknown tool: {unknown}; the tools are {', '.join(self.tools)}")
        try:
            arguments = check(tool.listing["inputSchema"], params.get("arguments") or {})
        except BadArguments as exc:
            return failure(clip.text(f"Invalid arguments for {name}: {exc}", 4096))
        return run_tool(tool.fn, arguments, self.max_result)


def run_tool(
    fn: Callable[..., dict[str, Any]],
    arguments: dict[str, Any],
    max_bytes: int = bounded.DEFAULT_MAX_BYTES,
) -> dict[str, Any]:
    """The tool's document as compact JSON text beside the same document as structured
    content, a failed command's document as an error; either within ``max_bytes`` on the
    wire (``bounded``), cut with the command that prints the whole."""
    _invoke.forget()
    try:
        document = fn(**arguments)
    except CommandFailed as exc:
        return bounded.failure(bounded.compact(exc.document), max_bytes, _see_more(fn, arguments))
    except Exception as exc:  # a bug in rgt: said as `main` says it, never a traceback
        said = {
            "error": "InternalError",
            "message": clip.text(f"{type(exc).__name__}: {exc}", 4096),
            "fix": "re-run the command with RGT_DEBUG=1 in a terminal and report it",
            "exit_code": 1,
        }
        return failure(bounded.compact(said))
    return bounded.success(document, max_bytes, _see_more(fn, arguments))


# The tools that are no single `rgt … --json` command, and what shows their whole answer.
SEE_MORE = {"logs": "rgt logs {job_id}", "ckpt_list": "ls -l {directory}"}


def _see_more(fn: Callable[..., Any], arguments: dict[str, Any]) -> str:
    """The command a human (or the agent, in a shell) runs for the whole document."""
    name = fn.__name__
    command = _invoke.last_command()
    if name in SEE_MORE or command is None:
        words = {k: shlex.quote(str(v)) for k, v in arguments.items()}
        template = SEE_MORE.get(name, "rgt " + name.replace("_", " ") + " … --json")
        command = template.format_map(_Blank(words))
    return f"{command} > rgt-{name}.out"


class _Blank(dict[str, str]):
    def __missing__(self, key: str) -> str:
        return "…"


def failure(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": True}
