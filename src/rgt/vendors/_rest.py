"""The base of every vendor client: one httpx session, retries, errors, and derived helpers.

A vendor module implements seven primitives (``catalog``, ``create``, ``get``, ``list``,
``stop``, ``start``, ``terminate``) and ``error_detail`` (its error envelope); this base does
the rest. The rules, the same for every vendor:

- 30 s deadline per request (httpx's timeout: on connecting and on each read or write, so a
  vendor that stops answering is cut off after 30 s); 429 and 5xx are retried with
  exponential backoff, honouring ``Retry-After``; a connection that never reached the vendor
  is retried too.
- A request that is not idempotent (create) is *not* retried after a 5xx or a timeout: the
  vendor may have acted. It raises ``VendorError(code="ambiguous")`` and the caller lists
  instances by name before trying again (``rgt.vendors.lifecycle``).
- 401/403 raise ``KeyRefusedError`` at once: retrying a wrong key only locks the account.
- The key never appears in an error: every text shown is passed through ``redact``.
"""

from __future__ import annotations

import builtins
import functools
import logging
import ssl
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from email.utils import parsedate_to_datetime
from typing import Any, ClassVar

import httpx

from rgt.errors import KeyRefusedError, VendorError
from rgt.vendors._keys import KEY_VARIABLES, redact
from rgt.vendors._model import TERMINATED, CreateRequest, GpuSpec, Instance, Offer, matching

log = logging.getLogger("rgt.vendors")

REQUEST_DEADLINE_S = 30.0
MAX_ATTEMPTS = 5
MAX_WAIT_S = 30.0


class VendorClient(ABC):
    vendor: ClassVar[str]
    default_url: ClassVar[str]
    # RunPod's delete is eventually consistent: only a 404 proves the pod is gone.
    gone_only_when_absent: ClassVar[bool] = False
    can_stop: ClassVar[bool] = True
    # What a stopped instance's disk costs (currency/GB/month), where the vendor publishes it.
    stopped_disk_per_gb_month: ClassVar[float | None] = None
    # What `up` creates from without --image: a container image, or a template (Paperspace).
    default_image: ClassVar[str] = "runpod/pytorch:2.4.0-py3.11-cuda12.4.1-devel-ubuntu22.04"
    max_attempts: int = MAX_ATTEMPTS

    def __init__(self, key: str, base_url: str | None = None, *, backoff_s: float = 0.5) -> None:
        self._key = key
        self.base_url = (base_url or self.default_url).rstrip("/")
        self.backoff_s = backoff_s
        self._http = httpx.Client(
            timeout=REQUEST_DEADLINE_S, headers=self.auth_headers(key), verify=_tls()
        )

    def auth_headers(self, key: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {key}", "Accept": "application/json"}

    def close(self) -> None:
        self._http.close()

    def quick(self, timeout_s: float) -> VendorClient:
        """One try with a short deadline: for a glance (`status`, `watch`), never for a verb."""
        self._http.timeout = httpx.Timeout(timeout_s)
        self.max_attempts = 1
        return self

    # -- primitives ----------------------------------------------------------------------

    @abstractmethod
    def catalog(self, count: int, spot: bool) -> list[Offer]:
        """Everything rentable now with ``count`` GPUs (any GPU family)."""

    @abstractmethod
    def create(self, request: CreateRequest) -> Instance: ...

    @abstractmethod
    def get(self, instance_id: str) -> Instance | None:
        """The instance, or None once the vendor no longer knows it."""

    @abstractmethod
    def list(self) -> list[Instance]:
        """Every instance of the account (all pages)."""

    @abstractmethod
    def stop(self, instance_id: str) -> None: ...

    @abstractmethod
    def start(self, instance_id: str) -> None: ...

    @abstractmethod
    def terminate(self, instance_id: str) -> None: ...

    @abstractmethod
    def error_detail(self, body: Any) -> tuple[str | None, str | None]:
        """``(code, message)`` from the vendor's error envelope, or ``(None, None)``."""

    def error_instance(self, body: Any) -> str | None:
        """The id of an instance that a *failed* create still made (vast.ai), else None."""
        return None

    # -- derived -------------------------------------------------------------------------

    def offers(
        self, gpu: str, *, spot: bool = False, region: str | None = None
    ) -> builtins.list[Offer]:
        """Offers of ``gpu`` (``NAME[:COUNT]``), cheapest first. Unknown names list valid ones."""
        spec = GpuSpec.parse(gpu)
        found = matching(self.catalog(spec.count, spot), spec)
        if region:
            found = [o for o in found if (o.region or "").lower() == region.lower()]
        return sorted(found, key=lambda o: (o.price_per_hour, o.id))

    def find(self, name: str) -> Instance | None:
        """The live instance named ``name`` (rgt's idempotency key), if any."""
        live = [i for i in self.list() if i.name == name and i.state != TERMINATED]
        return live[0] if live else None

    def gone(self, instance: Instance | None) -> bool:
        if instance is None:
            return True
        return not self.gone_only_when_absent and instance.state == TERMINATED

    # -- HTTP ----------------------------------------------------------------------------

    def call(
        self,
        method: str,
        url: str,
        *,
        json: Any = None,
        params: dict[str, Any] | None = None,
        idempotent: bool = True,
        missing_ok: bool = False,
    ) -> Any:
        """One API call with the retry rules above; returns the decoded JSON body."""
        full = url if url.startswith("http") else self.base_url + url
        for attempt in range(1, self.max_attempts + 1):
            started = time.monotonic()
            try:
                response = self._http.request(method, full, json=json, params=params)
            except httpx.ConnectError as exc:
                self._give_up_if(attempt, None, f"cannot reach {self.vendor}: {exc}", "connect")
                self._sleep(attempt, None)
                continue
            except httpx.TimeoutException as exc:
                if not idempotent:
                    raise self._error(
                        None, f"no answer within {REQUEST_DEADLINE_S:g}s", "ambiguous"
                    ) from exc
                self._give_up_if(attempt, None, f"{self.vendor} did not answer in time", "timeout")
                self._sleep(attempt, None)
                continue
            log.debug(
                "%s %s → %s (%.2fs)", method, url, response.status_code, time.monotonic() - started
            )
            if response.status_code == 429 or (response.status_code >= 500 and idempotent):
                self._give_up_if(attempt, response, "", None)
                self._sleep(attempt, response)
                continue
            return self._decode(response, missing_ok)
        raise AssertionError("unreachable")

    def _decode(self, response: httpx.Response, missing_ok: bool) -> Any:
        body = _json(response)
        status = response.status_code
        if status in (401, 403):
            raise KeyRefusedError(
                f"the key was refused by {self.vendor} (HTTP {status})",
                backend=self.vendor,
                status=status,
                fix=f"check ${KEY_VARIABLES[self.vendor]} (or credentials.toml): create a new "
                "key in the vendor's console if it was revoked",
            )
        if status == 404 and missing_ok:
            return None
        if status >= 400:
            code, message = self.error_detail(body)
            text = message or (response.text[:300] if body is None else str(body)[:300])
            error = self._error(status, text, code or ("ambiguous" if status >= 500 else None))
            error.instance_id = self.error_instance(body)
            raise error
        return body

    def _give_up_if(
        self, attempt: int, response: httpx.Response | None, text: str, code: str | None
    ) -> None:
        if attempt < self.max_attempts:
            return
        if response is not None:
            code, message = self.error_detail(_json(response))
            text = f"HTTP {response.status_code} after {attempt} tries: {message or ''}".strip()
            raise self._error(response.status_code, text, code or "retries_exhausted")
        raise self._error(None, f"{text} (after {attempt} tries)", code)

    def _sleep(self, attempt: int, response: httpx.Response | None) -> None:
        wait = retry_after(response) if response is not None else None
        if wait is None:
            wait = self.backoff_s * 2 ** (attempt - 1)
        time.sleep(min(wait, MAX_WAIT_S))

    def _error(self, status: int | None, text: str, code: str | None) -> VendorError:
        return VendorError(
            f"{self.vendor}: {redact(text, self._key)}",
            backend=self.vendor,
            status=status,
            code=code,
            fix="retry later; `rgt machines --orphans` shows anything the vendor bills"
            if code in ("ambiguous", "retries_exhausted", "timeout", "connect")
            else None,
        )


@functools.cache
def _tls() -> ssl.SSLContext:
    """One verifying TLS context per process (loading the CA bundle costs ~0.1–0.3 s)."""
    import certifi

    return ssl.create_default_context(cafile=certifi.where())


def retry_after(response: httpx.Response) -> float | None:
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


def _json(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None


ProgressFn = Callable[[Instance], None]
