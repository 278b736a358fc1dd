"""The MCP SDK's own client, driving `rgt mcp` as a subprocess over stdio, behind a small
synchronous face: one event loop in a thread, one session for a whole test module."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import sys
import threading
from collections.abc import Coroutine
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:  # the SDK loads where a server starts, not on every xdist worker's collection
    from mcp.types import Tool

    from mcp import ClientSession

T = TypeVar("T")
SRC = str(Path(__file__).resolve().parents[2] / "src")


@dataclass(frozen=True)
class Answer:
    is_error: bool
    data: dict[str, Any]  # the structured result, or the error's JSON document
    text: str


class McpRgt:
    """``rgt mcp`` started by the SDK's stdio client with its own RGT_HOME and working dir."""

    def __init__(self, home: Path, cwd: Path, env: dict[str, str] | None = None) -> None:
        from mcp.client.stdio import StdioServerParameters

        self.params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "rgt.cli", "mcp"],
            env={"RGT_HOME": str(home), "PYTHONPATH": SRC, **(env or {})},
            cwd=str(cwd),
        )
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.session: ClientSession | None = None
        self.ready = threading.Event()
        self.done: asyncio.Event | None = None
        self.serving: concurrent.futures.Future[None] | None = None

    def start(self, timeout: float = 120) -> None:
        """Start the server and initialize the session (one task owns both, start to end)."""
        self.thread.start()
        self.serving = asyncio.run_coroutine_threadsafe(self._serve(), self.loop)
        if not self.ready.wait(timeout):
            raise AssertionError(f"rgt mcp did not initialize within {timeout}s")

    async def _serve(self) -> None:
        from mcp.client.stdio import stdio_client

        from mcp import ClientSession

        self.done = asyncio.Event()
        async with AsyncExitStack() as stack:
            read, write = await stack.enter_async_context(
                stdio_client(self.params, errlog=sys.stderr)
            )
            self.session = await stack.enter_async_context(ClientSession(read, write))
            await self.session.initialize()
            self.ready.set()
            await self.done.wait()

    def tools(self) -> list[Tool]:
        assert self.session is not None
        return self._wait(self.session.list_tools()).tools

    def call(
        self, tool: str, arguments: dict[str, Any] | None = None, timeout: float = 120
    ) -> Answer:
        from mcp.types import TextContent

        assert self.session is not None
        result = self._wait(self.session.call_tool(tool, arguments or {}), timeout)
        text = "\n".join(c.text for c in result.content if isinstance(c, TextContent))
        if result.is_error:
            return Answer(True, _error_document(text), text)
        return Answer(False, dict(result.structured_content or {}), text)

    def stop(self) -> None:
        """Close the session; the SDK's client ends the server process."""
        if self.done is not None:
            self.loop.call_soon_threadsafe(self.done.set)
        if self.serving is not None:
            self.serving.result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)

    def _wait(self, coro: Coroutine[Any, Any, T], timeout: float = 120) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)


def _error_document(text: str) -> dict[str, Any]:
    """A tool error's message is "Error executing tool NAME: {json}"; the document or {}."""
    start = text.find("{")
    try:
        data = json.loads(text[start:]) if start != -1 else {}
    except json.JSONDecodeError:
        return {}
    return data if isinstance(data, dict) else {}


def environment_without_rgt() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("RGT_")}
