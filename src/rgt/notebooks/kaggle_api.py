"""Kaggle's kernel API over httpx: credentials, push a script kernel, its status, its output.

Why not the official ``kaggle`` package: kaggle 2.x needs Python >= 3.11 (its pyproject's
``requires-python``; rgt supports 3.10) and, reading ``~/.kaggle/kaggle.json``, it only prints
a warning for a file other users can read and swallows a file it cannot parse (a bare
``except: pass`` in ``kaggle_api_extended.read_config_file``). rgt speaks the same wire form
the package's ``kagglesdk`` speaks (kaggle >= 1.7): ``POST <base>/<service>/<Method>`` with a
camelCase JSON body, HTTP basic auth with the username and the legacy API key.

Where each shape comes from (Kaggle/kaggle-api, ``src/kaggle/api/kaggle_api_extended.py``:
``kernels_push``, ``kernels_status``, ``kernels_output``; field names as kagglesdk's
``kernels_api_service`` types serialise them; ``docs/kernels_metadata.md`` and
``docs/kernels.md`` for the metadata fields and accelerator ids):

- ``kernels.KernelsApiService/SaveKernel`` ← ``{slug, newTitle, text, language, kernelType,
  isPrivate, enableGpu, enableTpu, enableInternet, datasetDataSources, competitionDataSources,
  kernelDataSources, modelDataSources, categoryIds, machineShape}`` → ``{ref, url,
  versionNumber, error, invalidDatasetSources, invalidKernelSources, …}``
- ``kernels.KernelsApiService/GetKernelSessionStatus`` ← ``{userName, kernelSlug}`` →
  ``{status, failureMessage}``; status is kagglesdk's ``KernelWorkerStatus`` (QUEUED, RUNNING,
  COMPLETE, ERROR, CANCEL_REQUESTED, CANCEL_ACKNOWLEDGED, NEW_SCRIPT), lower-cased by the
  legacy REST form: both spellings are read.
- ``kernels.KernelsApiService/ListKernelSessionOutput`` ← ``{userName, kernelSlug,
  pageToken}`` → ``{files: [{fileName, url}], log, nextPageToken}``; each ``url`` is fetched
  with a plain GET (the package uses ``requests.get(item.url)``).

The retry rules are ``rgt.vendors._rest``'s: 30 s per request, 429 and 5xx retried with
backoff honouring ``Retry-After``, 401/403 never retried. The key never appears in an error.
"""

from __future__ import annotations

import json
import logging
import os
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from rgt.errors import KeyRefusedError, UsageError, VendorError
from rgt.vendors._keys import redact
from rgt.vendors._retry import MAX_ATTEMPTS, MAX_WAIT_S, REQUEST_DEADLINE_S, retry_after, tls

log = logging.getLogger("rgt.notebooks.kaggle")

DEFAULT_URL = "https://api.kaggle.com/v1"
URL_VARIABLE = "RGT_KAGGLE_API_URL"
SERVICE = "kernels.KernelsApiService"
CREDENTIALS_FIX = (
    "export KAGGLE_USERNAME and KAGGLE_KEY, or put the key file from kaggle.com → Settings → "
    "API → Create New Token at ~/.kaggle/kaggle.json (chmod 600 ~/.kaggle/kaggle.json)"
)


@dataclass(frozen=True)
class KaggleCredentials:
    username: str
    key: str = ""

    def __repr__(self) -> str:  # never the key, even in a traceback's locals
        return f"KaggleCredentials(username={self.username!r})"


def config_file() -> Path:
    base = os.environ.get("KAGGLE_CONFIG_DIR") or str(Path.home() / ".kaggle")
    return Path(base) / "kaggle.json"


def credentials() -> KaggleCredentials:
    """``KAGGLE_USERNAME``/``KAGGLE_KEY``, else ``~/.kaggle/kaggle.json`` (mode 0600 only).
    rgt reads them here and keeps them in memory: they are never written anywhere."""
    user, key = os.environ.get("KAGGLE_USERNAME"), os.environ.get("KAGGLE_KEY")
    if user and key:
        return KaggleCredentials(user, key)
    path = config_file()
    if not path.exists():
        raise UsageError(f"no Kaggle credentials (env unset, {path} missing)", fix=CREDENTIALS_FIX)
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        raise UsageError(
            f"{path} is readable by other users (mode {mode:04o}); rgt will not use it",
            fix=f"chmod 600 {path}",
        )
    try:
        doc = json.loads(path.read_text())
        return KaggleCredentials(str(doc["username"]), str(doc["key"]))
    except (ValueError, KeyError, TypeError) as exc:
        raise UsageError(
            f"{path} is not a Kaggle key file ({type(exc).__name__})", fix=CREDENTIALS_FIX
        ) from None


@dataclass(frozen=True)
class KernelStatus:
    status: str  # lower case: queued, running, complete, error, cancelrequested, …
    failure: str


@dataclass(frozen=True)
class OutputFile:
    name: str
    url: str


class KaggleClient:
    def __init__(self, creds: KaggleCredentials, base_url: str | None = None) -> None:
        self.creds = creds
        url = base_url or os.environ.get(URL_VARIABLE) or DEFAULT_URL
        self.base_url = url.rstrip("/")
        self.backoff_s = 0.5
        self._http = httpx.Client(
            timeout=REQUEST_DEADLINE_S,
            auth=httpx.BasicAuth(creds.username, creds.key),
            headers={"Accept": "application/json"},
            verify=tls(),
            follow_redirects=True,
        )

    def close(self) -> None:
        self._http.close()

    # -- the three calls -----------------------------------------------------------------

    def save_kernel(self, body: dict[str, Any]) -> dict[str, Any]:
        """Push ``body`` as a new version of its kernel (created on the first push)."""
        answer: dict[str, Any] = self.call("SaveKernel", body, idempotent=False)
        if answer.get("error"):
            raise VendorError(
                f"kaggle refused the kernel push: {self._redact(str(answer['error']))}",
                backend="kaggle",
                code="refused",
                fix="read Kaggle's message: a dataset or kernel source you named may not exist "
                "or be private to another account",
            )
        return answer

    def status(self, slug: str) -> KernelStatus:
        owner, _, name = slug.partition("/")
        doc = self.call("GetKernelSessionStatus", {"userName": owner, "kernelSlug": name})
        raw = str(doc.get("status") or "").lower().replace("_", "")
        return KernelStatus(raw, str(doc.get("failureMessage") or ""))

    def output(self, slug: str) -> tuple[list[OutputFile], str]:
        """Every output file of the kernel's latest version (all pages) and its log."""
        owner, _, name = slug.partition("/")
        files: list[OutputFile] = []
        token, log_text = "", ""
        while True:
            body = {"userName": owner, "kernelSlug": name, "pageToken": token}
            doc = self.call("ListKernelSessionOutput", body)
            files += [OutputFile(str(f["fileName"]), str(f["url"])) for f in doc.get("files") or []]
            log_text = log_text or str(doc.get("log") or "")
            token = str(doc.get("nextPageToken") or "")
            if not token:
                return files, log_text

    def download(self, url: str, dest: Path) -> None:
        response = self._send("GET", url, None, idempotent=True)
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(response.content)

    # -- HTTP ----------------------------------------------------------------------------

    def call(self, method: str, body: dict[str, Any], *, idempotent: bool = True) -> Any:
        url = f"{self.base_url}/{SERVICE}/{method}"
        response = self._send("POST", url, body, idempotent=idempotent)
        try:
            return response.json()
        except ValueError:
            raise self._error(response.status_code, f"{method} answered no JSON") from None

    def _send(self, verb: str, url: str, body: Any, *, idempotent: bool) -> httpx.Response:
        for attempt in range(1, MAX_ATTEMPTS + 1):
            try:
                response = self._http.request(verb, url, json=body)
            except httpx.TransportError as exc:
                if attempt == MAX_ATTEMPTS or (not idempotent and _maybe_sent(exc)):
                    raise self._error(None, f"no answer from Kaggle: {exc}") from exc
                self._sleep(attempt, None)
                continue
            log.debug("%s %s → %s", verb, url.rsplit("/", 1)[-1], response.status_code)
            retry = response.status_code == 429 or (response.status_code >= 500 and idempotent)
            if retry and attempt < MAX_ATTEMPTS:
                self._sleep(attempt, response)
                continue
            self._raise_for(response)
            return response
        raise AssertionError("unreachable")

    def _raise_for(self, response: httpx.Response) -> None:
        code = response.status_code
        if code in (401, 403):
            raise KeyRefusedError(
                f"Kaggle refused the credentials of {self.creds.username!r} (HTTP {code})",
                backend="kaggle",
                status=code,
                fix=CREDENTIALS_FIX + "; a key that was regenerated on kaggle.com stops working",
            )
        if code >= 400:
            raise self._error(code, f"HTTP {code}: {response.text[:300]}")

    def _sleep(self, attempt: int, response: httpx.Response | None) -> None:
        wait = retry_after(response) if response is not None else None
        time.sleep(min(self.backoff_s * 2 ** (attempt - 1) if wait is None else wait, MAX_WAIT_S))

    def _redact(self, text: str) -> str:
        return redact(text, self.creds.key)

    def _error(self, status: int | None, text: str) -> VendorError:
        return VendorError(
            f"kaggle: {self._redact(text)}",
            backend="kaggle",
            status=status,
            code="ambiguous" if status is None or status >= 500 else None,
            fix="retry later; `rgt status` shows whether the kernel was pushed",
        )


def _maybe_sent(exc: httpx.TransportError) -> bool:
    """A push that may have reached Kaggle is not repeated blindly (it would start a second
    version): only a connection that was never made is retried."""
    return not isinstance(exc, httpx.ConnectError)
