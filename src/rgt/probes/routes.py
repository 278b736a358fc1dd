"""Time a download route from the machine itself: time to first byte and a small transfer rate.

``agent audit --route KIND:LABEL=URL`` fetches at most ``LIMIT`` bytes of URL (a Range request;
a server that ignores Range is cut off at the limit) with the job's proxy variables, so the
numbers are what a job's download will see: ``direct`` (huggingface.co, pypi.org) against the
profile's mirror, from the machine, never from the user's laptop.
"""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from typing import Any, Dict

LIMIT = 256 * 1024
TIMEOUT_S = 5.0
CHUNK = 64 * 1024


def probe(url: str, limit: int = LIMIT, timeout: float = TIMEOUT_S) -> Dict[str, Any]:
    """``{"ok", "status", "ttfb_ms", "bytes", "rate_kib_s"}`` or ``{"ok": False, "error"}``."""
    request = urllib.request.Request(url, headers={"Range": "bytes=0-%d" % (limit - 1)})
    start = time.monotonic()
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            status = int(response.status)
            first = response.read(1)
            ttfb = time.monotonic() - start
            size = len(first) + _drain(response, limit - len(first), start + 2 * timeout)
    except urllib.error.HTTPError as exc:
        return {"ok": False, "status": exc.code, "error": "HTTP %d %s" % (exc.code, exc.reason)}
    except (OSError, ValueError) as exc:  # refused, DNS, timeout, TLS, a bad URL
        reason = getattr(exc, "reason", None) or exc
        return {"ok": False, "error": str(reason)[:200]}
    elapsed = max(time.monotonic() - start, 1e-6)
    return {
        "ok": size > 0,
        "status": status,
        "ttfb_ms": round(ttfb * 1000, 1),
        "bytes": size,
        "rate_kib_s": round(size / 1024 / elapsed, 1),
    }


def _drain(response: Any, budget: int, deadline: float) -> int:
    got = 0
    while got < budget and time.monotonic() < deadline:
        chunk = response.read(min(CHUNK, budget - got))
        if not chunk:
            break
        got += len(chunk)
    return got
