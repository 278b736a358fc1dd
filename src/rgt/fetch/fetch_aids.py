"""Parts of the fetch downloader (shipped next to it in the fetch job's snapshot; stdlib only,
Python 3.8): the sha256 hashed in a thread while a file is written, the platform accelerator
turned on for the downloader's own process, and the ``huggingface_hub`` path used when the
machine's interpreter has that library.
"""

from __future__ import annotations

import hashlib
import os
import queue
import subprocess
import sys
import threading
import time
from typing import Any, Dict, List, Optional

CHUNK = 1 << 20


class Fatal(Exception):
    """No retry can help: the message names the fix."""


def say(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


class Hashed:
    """sha256 of a part file kept while it is written, so verifying a 1 GB file costs no second
    read; a part left by an earlier run is hashed once when the download resumes. ``count``:
    the bytes handed over (a failed write makes it differ from the file: re-hashed)."""

    def __init__(self, path: str, enabled: bool) -> None:
        self.path, self.h, self.count, self.enabled = path, hashlib.sha256(), 0, enabled
        self.queues = []  # type: List[queue.Queue[Optional[bytes]]]
        self.threads = []  # type: List[threading.Thread]
        self.error = None  # type: Optional[OSError]

    def catch_up(self, start: int) -> None:
        if self.enabled and self.count != start:
            self.h, self.count = hashlib.sha256(), 0
            with open(self.path, "rb") as src:
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
            hub.snapshot_download(repo, revision=info.sha, allow_patterns=includes or None,
                                  local_dir=to, token=token or None, endpoint=endpoint)  # fmt: skip
            break
        except Exception as exc:  # the library's own error tree, named in the message
            message = _hub_error(exc, repo)
            if not message.endswith(RESUMABLE) or tries == retries:
                raise Fatal(message) from None
            wait = backoff * 2**tries  # the library resumes its partial files on the next try
            say("retry %d/%d of %s in %.1fs: %s" % (tries + 1, retries, source, wait, message))
            time.sleep(wait)
    names = sorted(s.rfilename for s in info.siblings or [])
    files = [n for n in names if os.path.isfile(os.path.join(to, n))]
    done = [{"name": n, "size": os.path.getsize(os.path.join(to, n)), "downloaded": None}
            for n in files]  # fmt: skip
    return {"source": source, "revision": info.sha, "files": done}


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
