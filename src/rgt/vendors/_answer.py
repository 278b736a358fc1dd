"""A vendor's answer, read with bounds, and the checks that its body is the documented shape.

``read_answer`` reads at most ``cap`` bytes of body (after decompression, which it does itself,
bounded, so a small gzip bomb cannot expand past the cap) and stops at the deadline even when
the server drips bytes under the per-read timeout. ``field``/``obj``/``dicts`` are what a
vendor module's ``expect=`` parser uses to say "this is not the documented envelope": each
raises ``Garbled``, which the client turns into a retried ``VendorError(code="garbled")``.
"""

from __future__ import annotations

import json
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx

# The most a vendor answer may hold. The largest documented answer rgt reads is a vast.ai
# offer search (a few MB); a body past this is a hostile or broken answer, not data.
MAX_BODY_BYTES = 16 * 2**20
# What a parser may raise on a body that is not the documented shape.
SHAPE_ERRORS = (KeyError, TypeError, ValueError, AttributeError, IndexError)
# What rgt asks for and can decode with a bound; any other Content-Encoding is garbled.
ACCEPT_ENCODING = "gzip, deflate"


class Garbled(ValueError):
    """An answer that is not the vendor's documented JSON (internal: becomes a VendorError)."""


@dataclass(frozen=True)
class Answer:
    """One HTTP answer, its body read in full (within the size cap and the deadline)."""

    status: int
    headers: httpx.Headers
    content: bytes

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")

    def json(self) -> Any:
        """The decoded JSON body, or ``None`` when there is none or it does not decode."""
        try:
            return json.loads(self.content) if self.content.strip() else None
        except ValueError:
            return None

    def describe(self) -> str:
        """What came instead of JSON, for an error: type, size and a clipped, printable start."""
        kind = self.headers.get("Content-Type", "no content type").split(";")[0]
        if not self.content.strip():
            return f"an empty body ({kind})"
        start = "".join(c if c.isprintable() else " " for c in self.text[:80]).strip()
        return f"a body that is not JSON ({kind}, {len(self.content)} bytes: {start!r})"


def read_answer(response: httpx.Response, cap: int, deadline: float) -> Answer:
    """The streamed ``response`` read in full: ``Garbled`` past ``cap`` bytes (decoded),
    ``httpx.ReadTimeout`` past ``deadline`` (a ``time.monotonic()`` instant)."""
    chunks, size = [], 0
    for chunk in _decoded(response, cap):
        size += len(chunk)
        if size > cap:
            raise Garbled(f"a body over {cap} bytes (stopped reading at {size})")
        if time.monotonic() > deadline:
            raise httpx.ReadTimeout("the body outlived the deadline", request=response.request)
        chunks.append(chunk)
    return Answer(response.status_code, response.headers, b"".join(chunks))


def _decoded(response: httpx.Response, cap: int) -> Iterator[bytes]:
    encoding = response.headers.get("Content-Encoding", "identity").strip().lower()
    if encoding in ("", "identity"):
        yield from response.iter_raw()
        return
    if encoding not in ("gzip", "deflate"):
        raise Garbled(f"a body in an encoding rgt did not ask for ({encoding[:40]!r})")
    inflate = zlib.decompressobj(zlib.MAX_WBITS | 32)  # a gzip or zlib header, detected
    try:
        for raw in response.iter_raw():
            pending = raw
            while pending:  # never more than cap + 1 bytes out of one piece of input
                yield inflate.decompress(pending, cap + 1)
                pending = inflate.unconsumed_tail
    except zlib.error as exc:
        raise Garbled(f"a {encoding} body that does not decompress ({exc})") from exc


def field(body: Any, key: str, kind: type | tuple[type, ...]) -> Any:
    """``body[key]``, which the vendor documents as a ``kind``; else the answer is garbled."""
    if not isinstance(body, dict) or key not in body:
        raise Garbled(f"no {key!r} in the answer")
    value = body[key]
    if not isinstance(value, kind):
        raise Garbled(f"{key!r} is a {type(value).__name__}")
    return value


def obj(value: Any) -> dict[str, Any]:
    """A documented JSON object; anything else is garbled."""
    if not isinstance(value, dict):
        raise Garbled(f"a {type(value).__name__} where an object belongs")
    return value


def dicts(value: Any) -> list[dict[str, Any]]:
    """A documented list of objects; anything else is garbled."""
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise Garbled(f"a {type(value).__name__} where a list of objects belongs")
    return value


def parse_body(
    answer: Answer, body: Any, expect: Callable[[Any], Any] | None, empty_ok: bool
) -> Any:
    """A 2xx answer's body as ``expect`` reads it; ``Garbled`` when it is not that answer
    (a redirect, no JSON, JSON without the documented envelope)."""
    if not 200 <= answer.status < 300:  # a redirect (to a login page): no answer at all
        raise Garbled(f"a redirect to {answer.headers.get('Location', 'nowhere')!r}")
    if empty_ok and not answer.content.strip():
        return None
    if body is None:
        raise Garbled(answer.describe())
    if expect is None:
        return body
    try:
        return expect(body)
    except SHAPE_ERRORS as exc:
        detail = str(exc) if isinstance(exc, Garbled) else repr(exc)
        raise Garbled(f"JSON that is not its documented answer ({detail[:120]})") from exc
