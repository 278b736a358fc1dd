"""Parts of the fetch downloader (shipped next to it in the fetch job's snapshot; stdlib only,
Python 3.8): the sha256 hashed in a thread while a file is written, the platform accelerator
turned on for the downloader's own process, and the ``huggingface_hub`` path used when the
machine's interpreter has that library.
"""

from __future__ import annotations

import contextlib
import fnmatch
import hashlib
import os
import queue
import re
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from typing import Any, Callable, Dict, List, Optional

if __package__:
    from rgt._confine import UnsafeNameError, open_parent, safe_name
else:  # in the fetch job's snapshot, _confine.py lies next to this file
    from _confine import UnsafeNameError, open_parent, safe_name  # type: ignore

CHUNK = 1 << 20


class Fatal(Exception):
    """No retry can help: the message names the fix."""


def say(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


class Hashed:
    """sha256 of a part file kept while it is written, so verifying a 1 GB file costs no second
    read; a part left by an earlier run is hashed once when the download resumes. ``count``:
    the bytes handed over (a failed write makes it differ from the file: re-hashed).
    ``reopen``: opens the part for reading (through the confined directory, never a link)."""

    def __init__(self, reopen: Callable[[], Any], enabled: bool) -> None:
        self.reopen, self.h, self.count, self.enabled = reopen, hashlib.sha256(), 0, enabled
        self.queues = []  # type: List[queue.Queue[Optional[bytes]]]
        self.threads = []  # type: List[threading.Thread]
        self.error = None  # type: Optional[OSError]

    def catch_up(self, start: int) -> None:
        if self.enabled and self.count != start:
            self.h, self.count = hashlib.sha256(), 0
            with self.reopen() as src:
                for block in iter(lambda: src.read(min(CHUNK, start - self.count)), b""):
                    self.update(block)

    def start(self, out: Any) -> None:
        """From now on one thread writes each chunk to ``out`` and another hashes it: the
        socket reads, the disk writes and the sha256 overlap (each releases the GIL; on a VM
        the page-cache write alone costs about as much CPU as the hash)."""
        self.error = None
        workers = [self._write] + ([self._hash] if self.enabled else [])
        self.queues = [queue.Queue(16) for _ in workers]
        self.threads = [
            threading.Thread(target=work, args=(q, out), daemon=True)
            for work, q in zip(workers, self.queues)
        ]
        for thread in self.threads:
            thread.start()

    def _write(self, chunks: "queue.Queue[Optional[bytes]]", out: Any) -> None:
        for data in iter(chunks.get, None):
            if self.error is None:
                try:
                    out.write(data)
                except OSError as exc:  # a full disk: the reader stops at its next chunk
                    self.error = exc

    def _hash(self, chunks: "queue.Queue[Optional[bytes]]", _out: Any) -> None:
        for data in iter(chunks.get, None):
            self.h.update(data)

    def stop(self) -> None:
        """Wait for the writes and the hash; raise the write's error, if any."""
        for chunks in self.queues:
            chunks.put(None)
        for thread in self.threads:
            thread.join()
        self.queues, self.threads = [], []
        error, self.error = self.error, None
        if error is not None:
            raise error

    def update(self, data: bytes) -> None:
        if self.queues:
            if self.error is not None:
                raise self.error
            for chunks in self.queues:
                chunks.put(data)
        elif self.enabled:
            self.h.update(data)
        self.count += len(data)


# The hub that issues an HF token: a redirect there (from a mirror named by HF_ENDPOINT) keeps
# the token, like huggingface_hub's ``_HUB_ORIGINS``.
HUB_ORIGINS = (("https", "huggingface.co", 443), ("https", "hf.co", 443))
PORTS = {"http": 80, "https": 443}


def origin(url: str) -> Any:
    """(scheme, host, port) with the scheme's default port: what a credential is bound to."""
    parts = urllib.parse.urlsplit(url)
    return (parts.scheme, (parts.hostname or "").lower(), parts.port or PORTS.get(parts.scheme))


def credential(header: str) -> bool:
    """A header that carries a secret: Authorization, Cookie, or any *token*/*key*/*auth*."""
    name = header.lower()
    return name == "cookie" or any(word in name for word in ("auth", "token", "key"))


class SameOrigin(urllib.request.HTTPRedirectHandler):
    """urllib re-sends every header to whatever ``Location`` names, ``Authorization: Bearer
    hf_…`` included. Credentials follow a redirect only to the same scheme, host and port, or
    to the hub itself (huggingface_hub's rule: ``utils/_http.py`` ``_is_same_or_hub_host``;
    its download drops ``authorization`` when a LFS file redirects to a CDN, whose signed URL
    needs none). Another host, port or scheme (https to http too) gets the request without
    them; a later hop back does not get them back."""

    def redirect_request(self, req: Any, fp: Any, code: int, msg: str, headers: Any,
                         newurl: str) -> Any:  # fmt: skip
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        target = origin(new.full_url) if new is not None else None
        if new is not None and target not in (origin(req.full_url), *HUB_ORIGINS):
            for key in [k for k in new.headers if credential(k)]:
                del new.headers[key]
        return new


def accelerate(kind: str) -> None:
    """Turn the platform's accelerator on for this process when the plan lists ``kind``."""
    hook = os.environ.get("RGT_PROXY_HOOK", "")
    if not hook or kind not in os.environ.get("RGT_ACCELERATE", "").split(","):
        return
    try:
        done = subprocess.run(
            ["bash", "-c", hook + " >/dev/null 2>&1; env -0"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        say("accelerator %r did not run (%s): going direct" % (hook, exc))
        return  # fmt: skip
    found = dict(item.partition(b"=")[::2] for item in done.stdout.split(b"\0") if item)
    got = {k.decode(): v.decode() for k, v in found.items()}
    proxies = {k: v for k, v in got.items() if k.lower().endswith("_proxy") and v}
    if not any(k.lower() in ("http_proxy", "https_proxy") for k in proxies):
        say("accelerator %r exported no http(s)_proxy: going direct" % hook)
        return
    keep = [os.environ.get("no_proxy", ""), got.get("no_proxy", ""), "localhost,127.0.0.1,::1"]
    hosts = [h.strip() for h in ",".join(keep).split(",") if h.strip()]
    os.environ.update(proxies)
    os.environ["no_proxy"] = os.environ["NO_PROXY"] = ",".join(dict.fromkeys(hosts))
    say("accelerator on for this download (%s); no_proxy=%s" % (hook, os.environ["no_proxy"]))


def hub_fetch(source: str, includes: List[str], to: str, token: str) -> Optional[Dict[str, Any]]:
    """``hf://`` through ``huggingface_hub`` when the interpreter has it (its own resume, etag
    and sha256 checks, ``HF_ENDPOINT``); ``None`` when it is not installed or
    ``RGT_FETCH_HUB=0``, and the stdlib path runs instead."""
    if not source.startswith("hf://") or os.environ.get("RGT_FETCH_HUB", "1") == "0":
        return None
    try:
        import huggingface_hub as hub
    except ImportError:
        return None
    repo, _sep, rev = source[5:].partition("@")
    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")
    say("fetching %s with huggingface_hub %s from %s" % (source, hub.__version__, endpoint))
    retries = int(os.environ.get("RGT_FETCH_RETRIES", "5"))
    backoff = float(os.environ.get("RGT_FETCH_BACKOFF_S", "2"))
    for tries in range(retries + 1):
        try:
            info = hub.HfApi(endpoint=endpoint, token=token or None).model_info(
                repo, revision=rev or None
            )
            names = hub_names(info.siblings or [], includes, to)
            hub.snapshot_download(repo, revision=info.sha, allow_patterns=literal(names),
                                  local_dir=to, token=token or None, endpoint=endpoint)  # fmt: skip
            break
        except UnsafeNameError:
            raise
        except Exception as exc:  # the library's own error tree, named in the message
            message = _hub_error(exc, repo)
            if not message.endswith(RESUMABLE) or tries == retries:
                raise Fatal(message) from None
            wait = backoff * 2**tries  # the library resumes its partial files on the next try
            say("retry %d/%d of %s in %.1fs: %s" % (tries + 1, retries, source, wait, message))
            time.sleep(wait)
    files = [n for n in sorted(names) if os.path.isfile(os.path.join(to, n))]
    done = [{"name": n, "size": os.path.getsize(os.path.join(to, n)), "downloaded": None}
            for n in files]  # fmt: skip
    return {"source": source, "revision": info.sha, "files": done}


def hub_names(siblings: List[Any], includes: List[str], to: str) -> List[str]:
    """The names ``--include`` selects, each checked before the library writes anything: a
    safe relative name, and no link on its way under ``to`` (the library then writes by path;
    older releases check none of it, 2.x refuses ``..`` and anchored names itself)."""
    names = []
    patterns = [p + "*" if p.endswith("/") else p for p in includes]  # the library's rule
    for sibling in siblings:
        name = getattr(sibling, "rfilename", None)
        if patterns and not any(fnmatch.fnmatch(str(name), p) for p in patterns):
            continue
        name = safe_name(name, what="the hub's file name", dest=to)
        with contextlib.suppress(FileNotFoundError):  # nothing on its way yet
            os.close(open_parent(to, name, create=False)[0])
        names.append(name)
    return names


def literal(names: List[str]) -> List[str]:
    """Patterns that match exactly these names (``allow_patterns`` is fnmatch, whose ``*``
    also matches ``/``): a second listing cannot slip another name in."""
    return [re.sub(r"([*?\[])", r"[\1]", n) for n in names]


def _hub_error(exc: Exception, repo: str) -> str:
    kind = type(exc).__name__
    status = getattr(getattr(exc, "response", None), "status_code", None)
    if kind == "GatedRepoError" or status in (401, 403):
        return ("%s: %s is gated or private and needs a token: accept its terms on the hub, then "
                "`rgt fetch … --token-stdin`" % (kind, repo))  # fmt: skip
    if kind.endswith("NotFoundError") or status == 404:
        return "HTTP 404 (%s): no such repo, revision or file (%s)" % (kind, repo)
    return "%s: %s%s" % (kind, (str(exc).splitlines() or [""])[0][:200], RESUMABLE)


RESUMABLE = "; run the fetch again to resume"  # the end of a message of a transient failure
