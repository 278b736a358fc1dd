"""MCP's stdio transport: JSON-RPC 2.0 messages, one per line, UTF-8, on stdin and stdout.

The spec (basic/transports, "stdio"): each message is a JSON-RPC request, notification or
response delimited by a newline and containing none; the server MAY write logs to stderr and
MUST NOT write anything to stdout that is not a valid MCP message. So, as the SDK does, the
server keeps private duplicates of fd 0 and fd 1 for the wire and points fd 0 at /dev/null and
fd 1 at stderr: a ``print`` anywhere in rgt, or a child process inheriting the descriptors, can
neither corrupt the protocol stream nor read the host's messages (nor a human's answer: an
approval must come from a terminal, never from the wire).
"""

from __future__ import annotations

import fcntl
import json
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Any

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603


@dataclass(frozen=True)
class Malformed:
    """A line that is no JSON-RPC message: answered with this error, ``id`` null if unknown."""

    code: int
    message: str
    id: str | int | None = None


class Wire:
    """Reads messages from ``inp`` and writes them to ``out``, one line each, whole lines only
    (writers on several threads hold one lock)."""

    def __init__(self, inp: IO[bytes], out: IO[bytes]) -> None:
        self._inp = inp
        self._out = out
        self._lock = threading.Lock()

    def messages(self) -> Iterator[dict[str, Any] | Malformed]:
        """Each message until the client closes stdin; blank lines are skipped."""
        for raw in self._inp:
            line = raw.decode("utf-8", errors="replace").strip()
            if line:
                yield parse(line)

    def send(self, message: dict[str, Any]) -> None:
        data = json.dumps(message, separators=(",", ":"), ensure_ascii=False, default=str)
        with self._lock:
            self._out.write(data.encode("utf-8") + b"\n")
            self._out.flush()

    def answer(self, msg_id: str | int | None, result: dict[str, Any]) -> None:
        self.send({"jsonrpc": "2.0", "id": msg_id, "result": result})

    def error(self, msg_id: str | int | None, code: int, message: str, data: Any = None) -> None:
        error: dict[str, Any] = {"code": code, "message": message}
        if data is not None:
            error["data"] = data
        self.send({"jsonrpc": "2.0", "id": msg_id, "error": error})


def parse(line: str) -> dict[str, Any] | Malformed:
    """One line as a JSON-RPC message object, or what is wrong with it. A batch (an array) is
    refused: JSON-RPC batching left MCP in protocol version 2025-06-18."""
    try:
        message = json.loads(line)
    except ValueError:
        return Malformed(PARSE_ERROR, "Parse error: not JSON")
    if not isinstance(message, dict):
        return Malformed(INVALID_REQUEST, "Invalid Request: one JSON-RPC object per line")
    msg_id = message.get("id")
    if not (msg_id is None or _valid_id(msg_id)):
        return Malformed(INVALID_REQUEST, "Invalid Request: id must be a string or an integer")
    if message.get("jsonrpc") != "2.0":
        return Malformed(INVALID_REQUEST, 'Invalid Request: "jsonrpc" must be "2.0"', msg_id)
    if "method" in message and not isinstance(message["method"], str):
        return Malformed(INVALID_REQUEST, "Invalid Request: method must be a string", msg_id)
    if "method" not in message and "result" not in message and "error" not in message:
        return Malformed(INVALID_REQUEST, "Invalid Request: no method", msg_id)
    return message


def _valid_id(msg_id: object) -> bool:
    return isinstance(msg_id, str) or (isinstance(msg_id, int) and not isinstance(msg_id, bool))


def claim_stdio() -> Wire:
    """The wire on private duplicates of stdin and stdout; fd 0 becomes /dev/null and fd 1
    stderr for everything else in the process and its children."""
    wire_in = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    wire_out = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    return Wire(os.fdopen(wire_in, "rb"), os.fdopen(wire_out, "wb"))
