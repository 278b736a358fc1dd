"""The loopback HTTP server under every vendor fake: routing, the Bearer-key check, injected
faults (429 with Retry-After, 500, a hang past the client's deadline) and the request log.

Hostile mode (``hostile.py`` names the answers): a fault may send ``raw`` bytes instead of JSON
(an HTML page, nothing, JSON cut short), stream a body of ``stream_bytes`` with no length (it
stops when the client hangs up), repeat for ``times`` requests (0: every one, a vendor that
stays broken), and match one exact path. ``liar = True`` makes the vendor accept every
terminate and keep the instance running (and billing).

An instance's life is the same state machine everywhere: it is created ``provisioning``, turns
``running`` (with the ssh address of a real sshd the test started) after ``boot_polls`` reads
and ``boot_seconds``; once deleted it stays visible for ``gone_polls`` reads and ``gone_seconds``,
then is gone.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

Reply = tuple[int, Any]
Handler = Callable[..., Reply]


@dataclass
class FakeInstance:
    id: str
    name: str
    offer: dict[str, Any]
    price: float
    created: float = field(default_factory=time.monotonic)
    reads: int = 0
    wanted: str = "running"  # running · stopped · deleted
    deleted_reads: int = 0
    deleted_at: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class Fault:
    status: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    path: str = ""  # only requests whose path contains this
    method: str = ""
    hang_s: float = 0.0
    act: bool = False  # do the work first, then answer with the fault (a lost answer)
    raw: bytes | None = None  # sent as is instead of JSON: HTML, nothing, JSON cut short
    content_type: str = "application/json"
    stream_bytes: int = 0  # a body of this many bytes, no Content-Length (a flood)
    times: int = 1  # requests it answers; 0: every one (a vendor that stays broken)
    exact: str = ""  # only requests to exactly this path
    taken: int = 0  # how many requests it answered

    def matches(self, method: str, path: str) -> bool:
        return (
            self.path in path
            and (not self.exact or self.exact == path)
            and (not self.method or self.method == method)
        )


class FakeVendor:
    """Subclasses fill ``routes`` and render instances in their vendor's shapes."""

    key = "fake-key-0123456789abcdef"

    def __init__(
        self,
        *,
        ssh_host: str = "127.0.0.1",
        ssh_port: int = 22,
        boot_polls: int = 2,
        boot_seconds: float = 0.0,
        gone_polls: int = 0,
        gone_seconds: float = 0.0,
        key: str | None = None,
    ) -> None:
        self.key = key or self.key
        self.ssh_host, self.ssh_port = ssh_host, ssh_port
        self.boot_polls, self.boot_seconds, self.gone_polls = boot_polls, boot_seconds, gone_polls
        self.gone_seconds = gone_seconds
        self.instances: dict[str, FakeInstance] = {}
        self.faults: deque[Fault] = deque()
        self.requests: list[tuple[str, str, Any]] = []
        self.lock = threading.Lock()
        self._next = 1000
        self.routes: list[tuple[str, re.Pattern[str], Handler]] = []
        self.server: ThreadingHTTPServer | None = None
        self.confirmed_at: dict[str, float] = {}  # instance id → when reads first said "gone"
        self.liar = False  # accept every terminate, keep the instance running and billing
        self.lied: list[str] = []

    # -- the state machine ---------------------------------------------------------------

    def new_id(self) -> str:
        self._next += 1
        return str(self._next)

    def add(self, name: str, offer: dict[str, Any], price: float, **extra: Any) -> FakeInstance:
        inst = FakeInstance(self.new_id(), name, offer, price, extra=extra)
        self.instances[inst.id] = inst
        return inst

    def phase(self, inst: FakeInstance, *, read: bool = True) -> str:
        """``provisioning`` · ``running`` · ``stopped`` · ``deleting`` · ``gone``."""
        if read:
            inst.reads += 1
        if inst.wanted == "deleted":
            waited = time.monotonic() - (inst.deleted_at or 0.0)
            if inst.deleted_reads > self.gone_polls and waited >= self.gone_seconds:
                self.confirmed_at.setdefault(inst.id, time.monotonic())
                return "gone"
            return "deleting"
        if inst.wanted == "stopped":
            return "stopped"
        booted = time.monotonic() - inst.created >= self.boot_seconds
        return "running" if inst.reads > self.boot_polls and booted else "provisioning"

    def _seen(self, inst: FakeInstance) -> FakeInstance:
        """One API read of ``inst``: a deleted instance lingers for ``gone_polls`` of them."""
        if inst.wanted == "deleted":
            inst.deleted_reads += 1
        return inst

    def visible(self) -> list[FakeInstance]:
        found = [self._seen(i) for i in list(self.instances.values())]
        return [i for i in found if self.phase(i, read=False) != "gone"]

    def lookup(self, instance_id: str) -> FakeInstance | None:
        inst = self.instances.get(instance_id)
        if inst is None or self.phase(self._seen(inst), read=False) == "gone":
            return None
        return inst

    def delete(self, instance_id: str) -> bool:
        inst = self.instances.get(instance_id)
        if inst is None or inst.wanted == "deleted":
            return False
        if self.liar:  # "terminated", says the answer; the instance runs on
            self.lied.append(instance_id)
            return True
        inst.wanted, inst.deleted_at = "deleted", time.monotonic()
        return True

    def billed(self) -> list[FakeInstance]:
        return [i for i in self.instances.values() if i.wanted != "deleted"]

    # -- HTTP ----------------------------------------------------------------------------

    def route(self, method: str, pattern: str, handler: Handler) -> None:
        self.routes.append((method, re.compile(pattern + "$"), handler))

    def unauthorized(self) -> Reply:
        return 401, {"error": "unauthorized"}

    def not_found(self) -> Reply:
        return 404, {"error": "not found"}

    def start(self) -> str:
        fake = self

        class _Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _serve(self) -> None:
                fake._serve(self)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.server.daemon_threads = True
        threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()

    def _serve(self, req: BaseHTTPRequestHandler) -> None:
        parts = urlsplit(req.path)
        length = int(req.headers.get("Content-Length") or 0)
        raw = req.rfile.read(length) if length else b""
        body = json.loads(raw) if raw else None
        query = {k: v[0] for k, v in parse_qs(parts.query).items()}
        with self.lock:
            self.requests.append((req.command, parts.path, body))
            fault = self._take_fault(req.command, parts.path)
        try:
            if fault is not None and not fault.act:
                time.sleep(fault.hang_s)
                return self._send_fault(req, fault)
            if req.headers.get("Authorization") != f"Bearer {self.key}":
                return self._send(req, *self.unauthorized())
            status, payload = self._dispatch(req.command, parts.path, body, query)
            if fault is not None:  # the vendor acted, but its answer is lost or an error
                time.sleep(fault.hang_s)
                return self._send_fault(req, fault)
            self._send(req, status, payload)
        except (BrokenPipeError, ConnectionResetError):
            req.close_connection = True  # the client hung up (a deadline, a size cap)

    def _dispatch(self, method: str, path: str, body: Any, query: dict[str, str]) -> Reply:
        for verb, pattern, handler in self.routes:
            match = pattern.match(path)
            if verb == method and match:
                with self.lock:
                    return handler(*match.groups(), body=body, query=query)
        return self.not_found()

    def _take_fault(self, method: str, path: str) -> Fault | None:
        for fault in list(self.faults):
            if fault.matches(method, path):
                fault.taken += 1
                if fault.times and fault.taken >= fault.times:
                    self.faults.remove(fault)
                return fault
        return None

    def _send_fault(self, req: BaseHTTPRequestHandler, fault: Fault) -> None:
        if fault.stream_bytes:
            return self._flood(req, fault)
        if fault.raw is None:
            return self._send(req, fault.status, fault.body, fault.headers)
        req.send_response(fault.status)
        headers = {"Content-Type": fault.content_type, "Content-Length": str(len(fault.raw))}
        for key, value in {**headers, **fault.headers}.items():
            req.send_header(key, value)
        req.end_headers()
        req.wfile.write(fault.raw)

    def _flood(self, req: BaseHTTPRequestHandler, fault: Fault) -> None:
        """A body with no length that goes on for ``stream_bytes`` (valid JSON if read whole)."""
        req.send_response(fault.status)
        req.send_header("Content-Type", fault.content_type)
        req.send_header("Connection", "close")
        for key, value in fault.headers.items():
            req.send_header(key, value)
        req.end_headers()
        req.close_connection = True
        head, tail, chunk = b'{"pad": "', b'"}', b"x" * 65536
        req.wfile.write(head)
        for _ in range(max(0, fault.stream_bytes - len(head) - len(tail)) // len(chunk)):
            req.wfile.write(chunk)
        req.wfile.write(tail)

    def _send(
        self,
        req: BaseHTTPRequestHandler,
        status: int,
        payload: Any,
        headers: dict[str, str] | None = None,
    ) -> None:
        data = b"" if payload is None else json.dumps(payload).encode()
        req.send_response(status)
        req.send_header("Content-Type", "application/json")
        req.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            req.send_header(key, value)
        req.end_headers()
        req.wfile.write(data)

    def count(self, method: str, fragment: str) -> int:
        return sum(1 for m, p, _ in self.requests if m == method and fragment in p)

    # -- what a test changes behind rgt's back --------------------------------------------

    def create_behind_rgts_back(self, name: str) -> str:
        """An instance made in the vendor's console: rgt never heard of it."""
        with self.lock:
            return self.add(name, self.default_offer(), 0.5).id

    def default_offer(self) -> dict[str, Any]:
        raise NotImplementedError
