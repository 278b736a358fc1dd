"""How a vendor call is retried: the limits, the backoff, ``Retry-After``, and TLS.

Shared by every REST vendor client (``_rest.VendorClient``) and the Kaggle API client. The
rules: a request has ``REQUEST_DEADLINE_S`` (``RGT_VENDOR_DEADLINE_S``); a retryable failure
(429, 5xx on an idempotent request, a connection that never reached the vendor, a garbled
2xx) is tried ``MAX_ATTEMPTS`` times in all, waiting what ``Retry-After`` says or an
exponential backoff from ``RGT_VENDOR_BACKOFF_S``, never more than ``MAX_WAIT_S`` at once.
"""

from __future__ import annotations

import functools
import os
import ssl
import time
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import httpx

    from rgt.vendors._answer import Answer

REQUEST_DEADLINE_S = 30.0
MAX_ATTEMPTS = 5
MAX_WAIT_S = 30.0
RETRY_FIX = "retry later; `rgt machines --orphans` shows anything the vendor bills"


class Retry(Exception):
    """A try that may be repeated: what went wrong, its error code, and the answer if any."""

    def __init__(self, text: str, code: str | None, answer: Answer | None = None) -> None:
        super().__init__(text)
        self.text, self.code, self.answer = text, code, answer


def backoff(attempt: int, first_s: float, answer: Answer | None) -> None:
    """Wait before try ``attempt + 1``: the vendor's ``Retry-After``, else ``first_s`` doubled
    per try; never more than ``MAX_WAIT_S``."""
    wait = retry_after(answer) if answer is not None else None
    if wait is None:
        wait = first_s * 2 ** (attempt - 1)
    time.sleep(min(wait, MAX_WAIT_S))


def retry_after(response: Answer | httpx.Response) -> float | None:
    """Seconds from a ``Retry-After`` header (delta-seconds or an HTTP date)."""
    value = response.headers.get("Retry-After")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


def env_s(variable: str, default: float) -> float:
    return float(os.environ.get(variable) or default)


@functools.cache
def tls() -> ssl.SSLContext:
    """One verifying TLS context per process (loading the CA bundle costs ~0.1–0.3 s)."""
    import certifi

    return ssl.create_default_context(cafile=certifi.where())
