"""A small forward proxy on loopback: it fetches the absolute URL it is asked for (Range kept)
and records it; it stands in for the platform's accelerator (AutoDL's ``network_turbo``)."""

from __future__ import annotations

import http.server
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from typing import ClassVar

DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class _Forward(http.server.BaseHTTPRequestHandler):
    seen: ClassVar[list[str]] = []
    hosts: ClassVar[dict[str, str]] = {}  # a host only the proxy reaches -> where it really is

    def do_GET(self) -> None:
        type(self).seen.append(self.path)
        headers = {k: v for k, v in self.headers.items() if k.lower() in ("range", "authorization")}
        parts = urllib.parse.urlsplit(self.path)
        url = parts._replace(netloc=self.hosts.get(parts.netloc, parts.netloc)).geturl()
        try:
            with DIRECT.open(urllib.request.Request(url, headers=headers)) as up:
                status, body, kind = up.status, up.read(), up.headers.get("Content-Type", "")
        except urllib.error.HTTPError as exc:
            status, body, kind = exc.code, exc.read(), "text/plain"
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def forward_proxy(hosts: dict[str, str] | None = None) -> Iterator[tuple[str, list[str]]]:
    """``(http://127.0.0.1:PORT, the URLs it was asked for)``; ``hosts``: names that do not
    resolve here (``pypi.invalid``) and the ``HOST:PORT`` the proxy sends them to, as an
    accelerator reaches what the machine cannot."""
    seen: list[str] = []
    handler = type("Forward", (_Forward,), {"seen": seen, "hosts": dict(hosts or {})})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()
