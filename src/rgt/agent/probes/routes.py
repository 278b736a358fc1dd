"""Time a download route from the machine itself: time to first byte and a small transfer rate.

``agent audit --route KIND:LABEL=URL`` fetches at most ``LIMIT`` bytes of URL (a Range request;
a server that ignores Range is cut off at the limit) with the job's proxy variables, so the
numbers are what a job's download will see: ``direct`` (huggingface.co, pypi.org) against the
profile's mirror, from the machine, never from the user's laptop. ``accelerator``: the direct URL
through the proxy that the platform's hook (``RGT_PROXY_HOOK``, e.g. ``source
/etc/network_turbo``) exports, read in a child shell so this process's own environment is kept.
"""

from __future__ import annotations

import subprocess
import time
import urllib.error
import urllib.request
from typing import Any, Dict, Optional

LIMIT = 256 * 1024
TIMEOUT_S = 5.0
CHUNK = 64 * 1024
PROXY_VARS = ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY")


def hook_proxies(hook: str) -> Dict[str, str]:
    """The proxy variables ``hook`` exports (run in a child bash; its output is discarded)."""
    try:
        done = subprocess.run(
            ["bash", "-c", hook + " >/dev/null 2>&1; env -0"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return {}
    pairs = (item.partition(b"=") for item in done.stdout.split(b"\0"))
    found = {k.decode(): v.decode() for k, _sep, v in pairs}
    return {k: found[k] for k in PROXY_VARS if found.get(k)}


def probe(
    url: str, limit: int = LIMIT, timeout: float = TIMEOUT_S, hook: Optional[str] = None
) -> Dict[str, Any]:
    """``{"ok", "status", "ttfb_ms", "bytes", "rate_kib_s"}`` or ``{"ok": False, "error"}``;
    ``hook``: go through the proxy it exports (no proxy exported: an error), named in ``proxy``
    (pip, which runs in jobs, is pointed at it alone: ``PIP_PROXY``)."""
    request = urllib.request.Request(url, headers={"Range": "bytes=0-%d" % (limit - 1)})
    opener, via = urllib.request.build_opener(), ""
    if hook is not None:
        found = hook_proxies(hook)
        proxies = {s: found.get(s + "_proxy") or found.get(s.upper() + "_PROXY") or ""
                   for s in ("http", "https")}  # fmt: skip
        if not any(proxies.values()):
            return {"ok": False, "error": "%r exported no http(s)_proxy" % hook}
        proxies = {k: v for k, v in proxies.items() if v}
        opener = urllib.request.build_opener(urllib.request.ProxyHandler(proxies))
        via = proxies.get("https") or proxies.get("http") or ""
    start = time.monotonic()
    try:
        with opener.open(request, timeout=timeout) as response:
            status = int(response.status)
            first = response.read(1)
            ttfb = time.monotonic() - start
            size = len(first) + _drain(response, limit - len(first), start + 2 * timeout)
    except urllib.error.HTTPError as exc:
        return {"ok": False, "status": exc.code, "error": "HTTP %d %s" % (exc.code, exc.reason)}
    except (OSError, ValueError) as exc:  # refused, DNS, timeout, no route, TLS, a bad URL
        reason = getattr(exc, "reason", None) or exc
        return {"ok": False, "error": str(reason)[:200], "ms": _ms(start)}
    elapsed = max(time.monotonic() - start, 1e-6)
    reading = {
        "ok": size > 0,
        "status": status,
        "ttfb_ms": round(ttfb * 1000, 1),
        "bytes": size,
        "rate_kib_s": round(size / 1024 / elapsed, 1),
    }  # type: Dict[str, Any]
    if hook is not None and "@" not in via:  # a proxy with a password is never written down
        reading["proxy"] = via
    return reading


def _ms(start: float) -> float:
    return round((time.monotonic() - start) * 1000, 1)


def _drain(response: Any, budget: int, deadline: float) -> int:
    got = 0
    while got < budget and time.monotonic() < deadline:
        chunk = response.read(min(CHUNK, budget - got))
        if not chunk:
            break
        got += len(chunk)
    return got
