"""A hub that lies, on 127.0.0.1: the Hugging Face API (the file list, ``resolve`` with HEAD and
GET, the tree listing ``huggingface_hub`` reads), answering whatever ``rfilename``s a test sets,
plus the answers a URL fetch can meet: a redirect to the same origin or to another server, an
endless body without a length, a body of a known sha256. Every request's headers are recorded,
so a second hub on another port shows what a redirect carried to it.
"""

from __future__ import annotations

import hashlib
import http.server
import json
import threading
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

COMMIT = "feedbeef" * 5
BODY = b"written by the hub\n"
ENDLESS_LIMIT = 8 << 20  # "endless": far past every cap a test sets, small enough to stay fast


@dataclass
class HubState:
    names: list[Any] = field(default_factory=list)  # the rfilenames the listing answers
    seen: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)  # verb, path, hdrs
    other: str = ""  # the base URL of another hub, for the cross-origin redirect
    endless_sent: int = 0

    def headers_for(self, prefix: str) -> list[dict[str, str]]:
        return [h for _verb, path, h in self.seen if path.startswith(prefix)]


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    state: HubState

    def do_HEAD(self) -> None:
        self._record("HEAD")
        name = self._resolved_name()
        if name is None:
            self.send_error(404, "Entry not found")
            return
        self.send_response(200)
        self.send_header("X-Repo-Commit", COMMIT)
        self.send_header("ETag", f'"{hashlib.sha256(BODY).hexdigest()}"')
        self.send_header("Content-Length", str(len(BODY)))
        self.end_headers()

    def do_GET(self) -> None:
        self._record("GET")
        path = urllib.parse.urlsplit(self.path).path
        parts = path.strip("/").split("/")
        if parts[:2] == ["api", "models"] and parts[4:5] == ["tree"]:
            return self._json([_tree_entry(n) for n in self.state.names])
        if parts[:2] == ["api", "models"]:
            siblings = [{"rfilename": n, "size": len(BODY)} for n in self.state.names]
            return self._json({"id": "org/repo", "sha": COMMIT, "siblings": siblings})
        if parts[0] == "redirect-away":
            return self._redirect(f"{self.state.other}/plain/{parts[-1]}")
        if parts[0] == "redirect-home":
            return self._redirect(f"/plain/{parts[-1]}")
        if parts[0] == "endless":
            return self._endless()
        if parts[0] == "plain" or self._resolved_name() is not None:
            return self._body(BODY)
        self.send_error(404, "Entry not found")
        return None

    def _resolved_name(self) -> str | None:
        path = urllib.parse.urlsplit(self.path).path
        marker = f"/resolve/{COMMIT}/"
        if marker not in path:
            return None
        return urllib.parse.unquote(path.split(marker, 1)[1])

    def _record(self, verb: str) -> None:
        self.state.seen.append((verb, self.path, {k.lower(): v for k, v in self.headers.items()}))

    def _redirect(self, where: str) -> None:
        self.send_response(302)
        self.send_header("Location", where)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _body(self, body: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _endless(self) -> None:
        """No Content-Length, no chunking: the body ends when the connection does, which a
        hostile server never does (here: after ENDLESS_LIMIT, so a failing test still ends)."""
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        block = b"\0" * (64 << 10)
        try:
            while self.state.endless_sent < ENDLESS_LIMIT:
                self.wfile.write(block)
                self.state.endless_sent += len(block)
        except OSError:
            pass  # the client hung up at its cap

    def _json(self, doc: Any) -> None:
        body = json.dumps(doc).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def _tree_entry(name: Any) -> dict[str, Any]:
    return {"type": "file", "path": name, "size": len(BODY), "oid": "0" * 40}


@contextmanager
def hub() -> Iterator[tuple[str, HubState]]:
    """A hub on a port of its own: its base URL and its state."""
    state = HubState()
    handler = type("Hub", (_Handler,), {"state": state})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", state
    finally:
        server.shutdown()
        server.server_close()
