"""The token gate: every route but ``/static/*`` needs the random token printed in the URL.

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
