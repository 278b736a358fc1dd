"""Upload verified files to a Hugging Face Hub repo, resumably, over the Hub's HTTP API.

The minimal documented subset ``huggingface_hub`` itself speaks (``upload_folder`` /
``upload_large_folder``), over urllib:

1. ``POST /api/repos/create`` (``exist_ok``: a 409 is fine);
2. ``POST /api/{type}s/{repo}/preupload/{rev}``: per file, ``uploadMode`` ``lfs`` or ``regular``;
3. ``POST /{repo}.git/info/lfs/objects/batch`` (git-lfs batch API, ``basic`` transfer): an
   object the Hub already has comes back without ``actions`` and is not sent again; otherwise
   ``PUT`` its bytes to ``actions.upload.href`` (with only that action's headers: the href is
   often another host, which never sees the token) and ``POST`` ``actions.verify``;
4. ``POST /api/{type}s/{repo}/commit/{rev}`` (NDJSON: a header line, ``lfsFile`` lines by
   sha256, ``file`` lines with small files inline in base64).

Resuming (what ``upload_large_folder`` keeps in ``.cache/huggingface/upload``): a ledger under
``$RGT_HOME/uploads/`` records, per file, its sha256, its upload mode, when the Hub acknowledged
its LFS bytes (PUT and verify answered 2xx), and the commit that holds it. A re-run after a
drop sends none of what was acknowledged. Each file's bytes are hashed while they are sent and
must equal the sha256 recorded when the artifact was verified: a file changed since is refused.

The token is read by the caller (stdin or a credentials entry, never argv) and sent only to the
Hub's own origin, never to an upload href of another host, and over https (or to a loopback
address, where the tests' fake hub listens).
"""

from __future__ import annotations

import hashlib
import json
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rgt._fs import atomic_write_json
from rgt.config import rgt_home
from rgt.errors import TransportError, UsageError

SAMPLE = 512  # the bytes preupload sees of each file
TIMEOUT_S = 120.0
TRIES = 3
CHUNK = 1 << 20
MAX_ANSWER = 8 << 20  # no Hub answer rgt reads is bigger


@dataclass(frozen=True)
class HubTarget:
    repo: str  # ORG/NAME
    revision: str = "main"
    repo_type: str = "model"
    endpoint: str = "https://huggingface.co"

    @classmethod
    def parse(cls, text: str, endpoint: str) -> HubTarget:
        body = text.removeprefix("hf://")
        repo, _, rev = body.partition("@")
        parts = repo.split("/")
        if len(parts) != 2 or not all(p and p.replace("-", "").replace("_", "").replace(".", "")
                                      .isalnum() for p in parts):  # fmt: skip
            raise UsageError(f"{text!r} is not hf://ORG/REPO[@REV]", fix="e.g. hf://me/my-model")
        return cls(repo, rev or "main", "model", _checked_endpoint(endpoint))

    @property
    def api(self) -> str:
        return f"{self.endpoint}/api/{self.repo_type}s/{self.repo}"

    @property
    def rev(self) -> str:
        return urllib.parse.quote(self.revision, safe="")


def _checked_endpoint(endpoint: str) -> str:
    parts = urllib.parse.urlsplit(endpoint.rstrip("/"))
    loopback = parts.hostname in ("127.0.0.1", "localhost", "::1")
    if parts.scheme != "https" and not (parts.scheme == "http" and loopback):
        raise UsageError(
            f"the Hub endpoint {endpoint!r} is not https: the token would travel in clear",
            fix="set HF_ENDPOINT to an https:// URL",
        )
    return endpoint.rstrip("/")


@dataclass(frozen=True)
class UploadFile:
    path: str  # path in the repo (and under the local root)
    sha256: str  # as verified when the artifact was pulled
    size: int


class Ledger:
    """What the Hub acknowledged, per file, kept across runs (one file per job and repo)."""

    def __init__(self, key: str) -> None:
        digest = hashlib.sha256(key.encode()).hexdigest()[:20]
        self.path = rgt_home() / "uploads" / f"{digest}.json"
        try:
            self.doc: dict[str, Any] = json.loads(self.path.read_text())
        except (OSError, ValueError):
            self.doc = {"key": key, "files": {}}

    def entry(self, f: UploadFile) -> dict[str, Any]:
        entry = self.doc["files"].get(f.path)
        if not entry or entry.get("sha256") != f.sha256:  # a new file, or other bytes: anew
            entry = self.doc["files"][f.path] = {"sha256": f.sha256, "size": f.size}
        return dict(entry)

    def note(self, f: UploadFile, **fields: Any) -> None:
        self.doc["files"][f.path] = {**self.entry(f), **fields}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(str(self.path), self.doc)


class HubClient:
    def __init__(self, target: HubTarget, token: str) -> None:
        self.target, self.token = target, token
        self.origin = origin(target.endpoint)

    def call(
        self, method: str, url: str, body: Any = None, headers: Mapping[str, str] | None = None
    ) -> Any:
        """One JSON (or NDJSON) request to the Hub, retried on a dropped connection or 5xx."""
        data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
        sent = {"Content-Type": "application/json", **(headers or {})}
        if origin(url) == self.origin:
            sent["Authorization"] = f"Bearer {self.token}"
        raw = with_retries(lambda: request_bytes(method, url, data, sent), f"{method} {_path(url)}")
        return json.loads(raw) if raw.strip() else {}


def origin(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def _path(url: str) -> str:
    return urllib.parse.urlsplit(url).path  # never a query: presigned URLs carry secrets there


class _SameOrigin(urllib.request.HTTPRedirectHandler):
    """A redirect is followed only within its origin: urllib would carry the token along."""

    def redirect_request(self, req: Any, fp: Any, code: int, msg: str, headers: Any,
                         newurl: str) -> Any:  # fmt: skip
        if origin(newurl) != origin(req.full_url):
            return None  # the 3xx is raised as an error
        return super().redirect_request(req, fp, code, msg, headers, newurl)


_OPENER = urllib.request.build_opener(_SameOrigin())


def request_bytes(method: str, url: str, data: Any, headers: Mapping[str, str]) -> bytes:
    request = urllib.request.Request(url, data=data, method=method, headers=dict(headers))
    with _OPENER.open(request, timeout=TIMEOUT_S) as answer:
        return bytes(answer.read(MAX_ANSWER))


def with_retries(send: Any, what: str) -> bytes:
    for attempt in range(1, TRIES + 1):
        try:
            return bytes(send())
        except urllib.error.HTTPError as exc:
            if exc.code < 500 or attempt == TRIES:
                raise _http_error(exc, what) from None
        except (urllib.error.URLError, OSError) as exc:
            if attempt == TRIES:
                raise TransportError(
                    f"{what}: the connection failed {TRIES} times ({exc})",
                    fix="run the same command again: what the Hub acknowledged is not re-sent",
                ) from None
        time.sleep(0.2 * 2**attempt)
    raise AssertionError("unreachable")


def _http_error(exc: urllib.error.HTTPError, what: str) -> TransportError:
    detail = exc.read(2000).decode("utf-8", "replace").strip()[:300]
    fix = {
        401: "the token was refused: give a write token (stdin or credentials)",
        403: "the token may not write to this repo: check its scope and the org",
        404: "no such repo or revision: check hf://ORG/REPO@REV",
    }.get(exc.code, "run the same command again: what the Hub acknowledged is not re-sent")
    return TransportError(f"{what}: the Hub answered {exc.code} {detail}", fix=fix)
