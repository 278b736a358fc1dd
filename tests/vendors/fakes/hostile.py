"""The hostile answers every vendor client must survive, and where each vendor's fake takes them.

An answer is a ``Fault`` recipe: what a CDN, a captive proxy, a broken deploy or a lying API
sends instead of the documented JSON. ``ENDPOINTS`` names, per vendor, the request of each
operation rgt depends on for money: the read that confirms a terminate, the listing behind
``--orphans``, the catalogue behind ``offers`` and the terminate itself.
"""

from __future__ import annotations

import functools
import gzip
from collections.abc import Callable
from dataclasses import dataclass

from tests.vendors.fakes._server import Fault

HTML = (
    b"<!DOCTYPE html><html><head><title>Just a moment...</title></head>"
    b"<body>checking your browser</body></html>"
)
NOT_FOUND_HTML = (
    b"<html><head><title>404 Not Found</title></head><body><h1>404</h1>nginx</body></html>"
)
BAD_GATEWAY_HTML = b"<html><body><h1>502 Bad Gateway</h1></body></html>"
CUT = b'{"data": {"id": "1001", "status": "termin'
# A body far past the client's cap (16 MiB): the fake stops when the client hangs up.
FLOOD_BYTES = 64 * 2**20
# Seconds a hanging answer waits: past the deadline the tests give the client.
HANG_S = 1.5


@functools.cache
def _bomb() -> bytes:
    """64 MiB of spaces in ~64 KiB of gzip: small on the wire, huge once inflated."""
    return gzip.compress(b" " * FLOOD_BYTES, compresslevel=9)


def _answers() -> dict[str, Callable[[], list[Fault]]]:
    return {
        "html_200": lambda: [Fault(200, raw=HTML, content_type="text/html")],
        "empty_200": lambda: [Fault(200, raw=b"")],
        "truncated_json": lambda: [Fault(200, raw=CUT)],
        "wrong_envelope": lambda: [Fault(200, {"ok": True, "result": "done"})],
        "json_null": lambda: [Fault(200, raw=b"null")],
        "not_found_html": lambda: [Fault(404, raw=NOT_FOUND_HTML, content_type="text/html")],
        "redirect_to_login": lambda: [
            Fault(302, raw=b"", headers={"Location": "https://login.example/sso"})
        ],
        "rate_limited": lambda: [Fault(429, {"error": "rate limited"}, {"Retry-After": "0"})],
        "server_errors": lambda: [
            Fault(502, raw=BAD_GATEWAY_HTML, content_type="text/html"),
            Fault(500, None),
            Fault(503, {"error": "unavailable"}),
        ],
        "hang": lambda: [Fault(200, {"ok": True}, hang_s=HANG_S)],
        "huge_body": lambda: [Fault(200, stream_bytes=FLOOD_BYTES)],
        "gzip_bomb": lambda: [Fault(200, raw=_bomb(), headers={"Content-Encoding": "gzip"})],
    }


ANSWERS = sorted(_answers())


def hostile(kind: str, method: str, exact: str, *, times: int = 0) -> list[Fault]:
    """The faults of answer ``kind`` on ``method exact``; ``times=0``: on every request."""
    faults = _answers()[kind]()
    for fault in faults:
        fault.method, fault.exact, fault.times = method, exact, times
    return faults


@dataclass(frozen=True)
class Endpoints:
    """``{id}`` stands for the instance id."""

    read: tuple[str, str]
    listing: tuple[str, str]
    catalog: tuple[str, str]
    terminate: tuple[str, str]


ENDPOINTS = {
    "runpod": Endpoints(
        ("GET", "/v1/pods/{id}"),
        ("GET", "/v1/pods"),
        ("POST", "/graphql"),
        ("DELETE", "/v1/pods/{id}"),
    ),
    "vastai": Endpoints(
        ("GET", "/instances/{id}/"),
        ("GET", "/instances/"),
        ("GET", "/bundles/"),
        ("DELETE", "/instances/{id}/"),
    ),
    "lambda": Endpoints(
        ("GET", "/instances/{id}"),
        ("GET", "/instances"),
        ("GET", "/instance-types"),
        ("POST", "/instance-operations/terminate"),
    ),
    "paperspace": Endpoints(
        ("GET", "/machines/{id}"),
        ("GET", "/machines"),
        ("GET", "/machine-types"),
        ("DELETE", "/machines/{id}"),
    ),
}
