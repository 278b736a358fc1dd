"""The base of every vendor client: one httpx session, retries, errors, and derived helpers.

A vendor module implements seven primitives (``catalog``, ``create``, ``get``, ``list``,
``stop``, ``start``, ``terminate``) and ``error_detail`` (its error envelope); this base does
the rest. The rules, the same for every vendor:

- 30 s deadline per request (httpx's timeout: on connecting and on each read or write);
  429, 5xx and a connection that never reached the vendor are retried (``_retry``).
- A request that is not idempotent (create) is *not* retried after a 5xx or a timeout: the
  vendor may have acted. It raises ``VendorError(code="ambiguous")`` and the caller lists
  instances by name before trying again (``rgt.vendors.lifecycle``).
- 401/403 raise ``KeyRefusedError`` at once: retrying a wrong key only locks the account.
- The key never appears in an error: every text shown is passed through ``redact``.
- An answer is parsed or it is an error. A 2xx whose body is not JSON (a proxy's HTML page,
  an empty or cut body) or lacks the vendor's documented envelope is a ``VendorError``
  (``code="garbled"``), retried like a 5xx — never read as "no instance". Each vendor module
  passes ``expect=``: the function that turns the documented body into rgt's records; any
  ``KeyError``/``TypeError``/``ValueError`` in it means "not the documented answer". Only an
  explicit not-found — a 404 carrying the vendor's JSON error envelope (``is_not_found``) —
  returns ``None`` from a ``missing_ok`` call: the one answer that may mean "gone".
- A body is read at most ``max_body_bytes`` (16 MiB, after decompression) and within
  ``deadline_s`` in all (a server that drips bytes under the per-read timeout is cut off too).
"""

from __future__ import annotations

import builtins
import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, ClassVar

import httpx

from rgt.errors import KeyRefusedError, VendorError
from rgt.vendors._answer import (
    ACCEPT_ENCODING,
    MAX_BODY_BYTES,
    Answer,
    Garbled,
    parse_body,
    read_answer,
)
from rgt.vendors._keys import KEY_VARIABLES, redact
from rgt.vendors._model import TERMINATED, CreateRequest, GpuSpec, Instance, Offer, matching
from rgt.vendors._retry import (
    MAX_ATTEMPTS,
    REQUEST_DEADLINE_S,
    RETRY_FIX,
    Retry,
    backoff,
    env_s,
    tls,
)

log = logging.getLogger("rgt.vendors")


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
    # Where a human sees (and can terminate) the account's instances.
    console_url: ClassVar[str] = ""
    max_attempts: int = MAX_ATTEMPTS
    max_body_bytes: int = MAX_BODY_BYTES

    def __init__(
        self, key: str, base_url: str | None = None, *, backoff_s: float | None = None
    ) -> None:
        self._key = key
        self.base_url = (base_url or self.default_url).rstrip("/")
        self.backoff_s = backoff_s if backoff_s is not None else env_s("RGT_VENDOR_BACKOFF_S", 0.5)
        self.deadline_s = env_s("RGT_VENDOR_DEADLINE_S", REQUEST_DEADLINE_S)
        self._http = httpx.Client(
            timeout=self.deadline_s, headers=self.auth_headers(key), verify=tls()
        )

    def auth_headers(self, key: str) -> dict[str, str]:
        return {
            "Authorization": f"Bearer {key}",
            "Accept": "application/json",
            "Accept-Encoding": ACCEPT_ENCODING,
        }

    def close(self) -> None:
        self._http.close()

    def quick(self, timeout_s: float) -> VendorClient:
        """One try with a short deadline: for a glance (`status`, `watch`), never for a verb."""
        self._http.timeout = httpx.Timeout(timeout_s)
        self.deadline_s = timeout_s
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

    def is_not_found(self, body: Any) -> bool:
        """Whether a 404's decoded body is the vendor's own not-found error (not a proxy's)."""
        return self.error_detail(body) != (None, None)

    # -- derived -------------------------------------------------------------------------

    def offers(
        self, gpu: str, *, spot: bool = False, region: str | None = None
    ) -> builtins.list[Offer]:
        """Offers of ``gpu`` (``NAME[:COUNT]``), cheapest first. Unknown names list valid ones."""
        spec = GpuSpec.parse(gpu)
        catalog = self.catalog(spec.count, spot)
        if not catalog:  # a parsed, empty catalogue: nothing to match a name against
            raise VendorError(
                f"{self.vendor} offers nothing{' spot' if spot else ''} with {spec.count} "
                "GPU(s) now",
                backend=self.vendor,
                code="no_capacity",
                fix="try another GPU count, another vendor, or later (`rgt offers`)",
            )
        found = matching(catalog, spec)
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
        expect: Callable[[Any], Any] | None = None,
        empty_ok: bool = False,
    ) -> Any:
        """One API call with the retry rules above; returns ``expect(body)`` (the decoded JSON
        when no ``expect``). ``None`` only for a ``missing_ok`` call the vendor says is not
        found, or an empty body where ``empty_ok`` (an action whose answer rgt never reads)."""
        full = url if url.startswith("http") else self.base_url + url
        for attempt in range(1, self.max_attempts + 1):
            try:
                return self._attempt(
                    method, full, json, params, idempotent, (missing_ok, empty_ok), expect
                )
            except Retry as retry:
                self._give_up_if(attempt, retry.answer, retry.text, retry.code)
                backoff(attempt, self.backoff_s, retry.answer)
        raise AssertionError("unreachable")

    def _attempt(
        self,
        method: str,
        url: str,
        json: Any,
        params: dict[str, Any] | None,
        idempotent: bool,
        allowed: tuple[bool, bool],
        expect: Callable[[Any], Any] | None,
    ) -> Any:
        """One try: the parsed answer, or ``Retry`` (retryable), or a ``VendorError``."""
        started = time.monotonic()
        try:
            answer = self._send(method, url, json, params)
        except httpx.ConnectError as exc:
            raise Retry(f"cannot reach {self.vendor}: {exc}", "connect") from exc
        except httpx.TimeoutException as exc:
            if not idempotent:
                raise self._error(
                    None, f"no answer within {self.deadline_s:g}s", "ambiguous"
                ) from exc
            raise Retry(f"{self.vendor} did not answer in time", "timeout") from exc
        except Garbled as exc:  # a body over the size cap
            problem = str(exc)
        else:
            log.debug("%s %s → %s (%.2fs)", method, url, answer.status, time.monotonic() - started)
            if answer.status == 429 or (answer.status >= 500 and idempotent):
                raise Retry("", None, answer)
            try:
                return self._decode(answer, allowed[0], expect, allowed[1])
            except Garbled as exc:
                problem = f"HTTP {answer.status} with {exc}"
        if not idempotent:  # the vendor may have acted: never repeat it blindly
            raise self._error(200, f"answered {problem}", "ambiguous")
        raise Retry(f"answered {problem}", "garbled")

    def _send(self, method: str, url: str, json: Any, params: dict[str, Any] | None) -> Answer:
        request = self._http.build_request(method, url, json=json, params=params)
        response = self._http.send(request, stream=True)
        try:
            return read_answer(response, self.max_body_bytes, time.monotonic() + self.deadline_s)
        finally:
            response.close()

    def _decode(
        self,
        answer: Answer,
        missing_ok: bool,
        expect: Callable[[Any], Any] | None,
        empty_ok: bool,
    ) -> Any:
        status, body = answer.status, answer.json()
        if status in (401, 403):
            raise KeyRefusedError(
                f"the key was refused by {self.vendor} (HTTP {status})",
                backend=self.vendor,
                status=status,
                fix=f"check ${KEY_VARIABLES[self.vendor]} (or credentials.toml): create a new "
                "key in the vendor's console if it was revoked",
            )
        if status == 404 and missing_ok:
            if not self.is_not_found(body):  # a proxy's or CDN's 404 page proves nothing
                raise Garbled(f"no {self.vendor} not-found error: {answer.describe()}")
            return None
        if status >= 400:
            code, message = self.error_detail(body)
            if message is None and status < 500:  # a proxy's page, not the vendor's error
                raise Garbled(f"no {self.vendor} error: {answer.describe()}")
            text = message or (answer.text[:300] if body is None else str(body)[:300])
            error = self._error(status, text, code or ("ambiguous" if status >= 500 else None))
            error.instance_id = self.error_instance(body)
            raise error
        return parse_body(answer, body, expect, empty_ok)

    def _give_up_if(
        self, attempt: int, response: Answer | None, text: str, code: str | None
    ) -> None:
        if attempt < self.max_attempts:
            return
        if response is not None:
            code, message = self.error_detail(response.json())
            text = f"HTTP {response.status} after {attempt} tries: {message or ''}".strip()
            error = self._error(response.status, text, code or "retries_exhausted")
        else:
            error = self._error(None, f"{text} (after {attempt} tries)", code)
        error.fix = error.fix or RETRY_FIX
        raise error

    def _error(self, status: int | None, text: str, code: str | None) -> VendorError:
        return VendorError(
            f"{self.vendor}: {redact(text, self._key)}",
            backend=self.vendor,
            status=status,
            code=code,
            fix=RETRY_FIX
            if code in ("ambiguous", "retries_exhausted", "timeout", "connect", "garbled")
            else None,
        )


ProgressFn = Callable[[Instance], None]
