"""The gates in front of every route: this host only, this origin only, then the token.

``LocalOnly`` (every mode, ``--no-token`` included): a request whose ``Host`` is not the
address the server is bound to (``127.0.0.1:PORT``, ``localhost:PORT``, ``[::1]:PORT``) is
refused, so a page on another site that re-points its own name at 127.0.0.1 (DNS rebinding)
reads nothing; and a request that changes state (anything but GET/HEAD/OPTIONS) must come from
this origin: ``Origin`` naming one of those addresses, or, where a browser sends no Origin,
``Sec-Fetch-Site: same-origin``. A browser always says one of them on a POST, so a plain
browser on this machine keeps working and a cross-site form or ``text/plain`` fetch is
refused. A client that sends neither (curl) passes only with the token header.

``TokenGate``: every route but ``/static/*`` needs the random token printed in the URL.
Other local users can reach 127.0.0.1 too; the token keeps them out. It may come as
``?token=T`` (then an HttpOnly, SameSite=Strict cookie carries it, so links work without it),
as the ``rgt_ui`` cookie, or as the ``X-RGT-Token`` header (the cancel POST). Compared in
constant time.
"""

from __future__ import annotations

import hmac
import json
import secrets
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qs

from starlette.types import ASGIApp, Message, Receive, Scope, Send

COOKIE = "rgt_ui"
HEADER = b"x-rgt-token"
FORBIDDEN_HTML = (
    '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>rgt ui: forbidden</title>'
    '</head><body data-page="forbidden"><main><h1>403: token missing or wrong</h1>'
    "<p>Open the URL <code>rgt ui</code> printed (it carries <code>?token=…</code>).</p>"
    "</main></body></html>"
)


LOCAL_NAMES = ("127.0.0.1", "localhost", "[::1]")
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")


class LocalOnly:
    """Pure ASGI middleware: the Host and Origin checks above, before anything else runs."""

    def __init__(self, app: ASGIApp, token_required: bool) -> None:
        self.app, self.token_required = app, token_required

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        hosts = allowed_hosts(scope)
        headers = dict(scope.get("headers") or [])
        if headers.get(b"host", b"").decode("latin-1").lower() not in hosts:
            await _refuse(scope, send, _wrong_host(hosts))
        elif scope["method"] not in SAFE_METHODS and not self._same_origin(headers, hosts):
            await _refuse(scope, send, _cross_origin(hosts))
        else:
            await self.app(scope, receive, send)

    def _same_origin(self, headers: dict[bytes, bytes], hosts: frozenset[str]) -> bool:
        origin = headers.get(b"origin")
        if origin is not None:
            return origin.decode("latin-1").lower() in {f"http://{h}" for h in hosts}
        site = headers.get(b"sec-fetch-site")
        if site is not None:
            return site == b"same-origin"
        # No browser: a cross-site request cannot add the token header without a preflight.
        return self.token_required and HEADER in headers


def allowed_hosts(scope: Scope) -> frozenset[str]:
    """``Host`` values of this server: the loopback names with the port it listens on."""
    server = scope.get("server") or ("127.0.0.1", 80)
    port = server[1]
    names = {f"{n}:{port}" for n in LOCAL_NAMES}
    if port == 80:
        names |= set(LOCAL_NAMES)
    return frozenset(names)


def _wrong_host(hosts: frozenset[str]) -> dict[str, str]:
    return {
        "error": "Host is not this server's address",
        "fix": f"open http://{min(hosts)}/ (rgt ui answers only its loopback address)",
    }


def _cross_origin(hosts: frozenset[str]) -> dict[str, str]:
    return {
        "error": "a change from another origin (or an unknown one) is refused",
        "fix": f"use the page's button at http://{min(hosts)}/, or send "
        f"Origin: http://{min(hosts)} with the request",
    }


async def _refuse(scope: Scope, send: Send, said: dict[str, str]) -> None:
    body = json.dumps(said).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
    ]
    await send({"type": "http.response.start", "status": 403, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def new_token() -> str:
    return secrets.token_urlsafe(24)


def presented(scope: Scope) -> tuple[str | None, bool]:
    """(the token the request carries, whether it came in the query string)."""
    query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
    if query.get("token"):
        return query["token"][-1], True
    headers = dict(scope.get("headers") or [])
    if HEADER in headers:
        return headers[HEADER].decode("latin-1"), False
    cookie: SimpleCookie = SimpleCookie()
    try:
        cookie.load(headers.get(b"cookie", b"").decode("latin-1"))
    except Exception:  # a malformed Cookie header is no token
        return None, False
    morsel = cookie.get(COOKIE)
    return (morsel.value if morsel else None), False


def matches(given: str | None, token: str) -> bool:
    return given is not None and hmac.compare_digest(given.encode(), token.encode())


class TokenGate:
    """Pure ASGI middleware (a streaming SSE response passes through untouched)."""

    def __init__(self, app: ASGIApp, token: str | None) -> None:
        self.app, self.token = app, token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.token is None or _public(scope["path"]):
            await self.app(scope, receive, send)
            return
        given, in_query = presented(scope)
        if not matches(given, self.token):
            await _forbid(scope, send)
            return
        if not in_query:
            await self.app(scope, receive, send)
            return
        await self.app(scope, receive, _with_cookie(send, self.token))


def _public(path: str) -> bool:
    return path.startswith("/static/") or path == "/favicon.ico"


def _with_cookie(send: Send, token: str) -> Send:
    value = f"{COOKIE}={token}; HttpOnly; SameSite=Strict; Path=/".encode("latin-1")

    async def wrapped(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = list(message.get("headers") or [])
            headers.append((b"set-cookie", value))
            message = {**message, "headers": headers}
        await send(message)

    return wrapped


async def _forbid(scope: Scope, send: Send) -> None:
    if scope["path"].startswith("/api/") or scope["path"].startswith("/fragments/"):
        body = json.dumps(_error()).encode()
        kind = b"application/json"
    else:
        body, kind = FORBIDDEN_HTML.encode(), b"text/html; charset=utf-8"
    headers = [(b"content-type", kind), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 403, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _error() -> dict[str, Any]:
    return {
        "error": "token missing or wrong",
        "fix": "use the URL `rgt ui` printed, or send the X-RGT-Token header",
    }
