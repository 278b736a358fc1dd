"""The downloader a fetch job runs ON the machine: stdlib only, Python 3.8, one file (rgt copies
it into the fetch job's snapshot and runs ``python3 downloader.py SOURCE --to DIR``).

- ``hf://ORG/MODEL[@REV]``: the file list, sizes and LFS sha256 come from
  ``$HF_ENDPOINT/api/models/ORG/MODEL/revision/REV?blobs=true``; each file from
  ``/ORG/MODEL/resolve/<commit>/<file>``. ``https://…``: one file, named after the URL.
- A file already complete (size, and sha256 when published) is not downloaded again; a partial
  ``<file>.part`` resumes with ``Range``; a dropped connection is retried with backoff.
- Verified: the size the hub publishes (or ``X-Linked-Size``/``Content-Length``), the LFS sha256,
  the git blob sha1 of a small file's ``ETag``. An HTML page where a file was expected (a mirror's
  error page) fails at once; so do 401/403/404 and a full disk (the partial file is kept).
- The token is read from the environment variable named by ``--token-env`` (a secret rgt sends
  over stdin), never from argv. The result is ``DIR/.rgt-fetch.json``.
- The platform's accelerator (``RGT_PROXY_HOOK``, e.g. ``source /etc/network_turbo``) is turned
  on for this process only, when ``RGT_ACCELERATE`` lists the source's kind (``hf``, ``url``):
  its proxy variables are read from a child shell, and ``no_proxy`` keeps the plan's hosts
  (localhost, the mirrors) and the hook's own off the proxy.
- sha256 is computed in a second thread while the file is written (hashlib releases the GIL).

Exit codes: 0 done, 1 failed (the message says why and what to do).
"""

from __future__ import annotations

import argparse
import errno
import fnmatch
import hashlib
import http.client
import json
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Dict, List, Optional

if __package__:
    from rgt.fetch.fetch_aids import CHUNK, Fatal, Hashed, accelerate, hub_fetch, say
else:  # run as a script from the fetch job's snapshot, where fetch_aids.py lies next to it
    from fetch_aids import CHUNK, Fatal, Hashed, accelerate, hub_fetch, say  # type: ignore

RETRIES = int(os.environ.get("RGT_FETCH_RETRIES", "5"))
BACKOFF_S = float(os.environ.get("RGT_FETCH_BACKOFF_S", "2"))
RESULT = ".rgt-fetch.json"
PROGRESS_S = 10.0  # a progress line in the job's log (`rgt logs`, `rgt watch`)


def request(url: str, token: str, start: int = 0, method: str = "GET") -> Any:
    headers = {"User-Agent": "rgt-fetch/1"}
    if token:
        headers["Authorization"] = "Bearer " + token
    if start:
        headers["Range"] = "bytes=%d-" % start
    try:
        opener = urllib.request.build_opener()  # proxies from the environment as it is now
        return opener.open(urllib.request.Request(url, headers=headers, method=method))
    except urllib.error.HTTPError as exc:
        if exc.code in (401, 403):
            raise Fatal(
                "HTTP %d for %s: the repo is gated or private and needs a token: accept its terms "
                "on the hub, then `rgt fetch … --token-stdin` (sent as a secret over stdin)"
                % (exc.code, _strip(url))
            ) from None
        if exc.code == 404:
            raise Fatal("HTTP 404 for %s: no such repo, revision or file" % _strip(url)) from None
        if exc.code == 416:
            return None  # the range starts at the end: the part is already whole
        if exc.code >= 500:
            raise OSError("HTTP %d from %s" % (exc.code, _strip(url))) from None
        raise Fatal("HTTP %d for %s" % (exc.code, _strip(url))) from None


def _strip(url: str) -> str:
    return url.split("?", 1)[0]


def hf_files(endpoint: str, repo: str, rev: str, token: str) -> Dict[str, Any]:
    url = "%s/api/models/%s/revision/%s?blobs=true" % (endpoint, repo, urllib.parse.quote(rev))
    with request(url, token) as response:
        body = response.read()
    try:
        info = json.loads(body.decode("utf-8"))
    except ValueError:
        raise Fatal(
            "%s answered %r… instead of the repo's JSON: the endpoint is not a Hugging Face hub "
            "(check HF_ENDPOINT / `rgt up --mirror hf=URL`)" % (_strip(url), body[:40])
        ) from None
    return info  # type: ignore[no-any-return]


def plan(source: str, includes: List[str], token: str) -> Dict[str, Any]:
    if source.startswith("hf://"):
        repo, _sep, rev = source[5:].partition("@")
        endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")
        info = hf_files(endpoint, repo, rev or "main", token)
        commit = info.get("sha") or rev or "main"
        files = []
        for s in info.get("siblings") or []:
            name = s["rfilename"]
            if includes and not any(fnmatch.fnmatch(name, p) for p in includes):
                continue
            lfs = s.get("lfs") or {}
            url = "%s/%s/resolve/%s/%s" % (endpoint, repo, commit, urllib.parse.quote(name))
            files.append(
                {"name": name, "url": url, "size": lfs.get("size", s.get("size")),
                 "sha256": lfs.get("sha256"), "blob_id": s.get("blobId")}
            )  # fmt: skip
        return {"source": source, "revision": commit, "files": files}
    name = os.path.basename(urllib.parse.urlsplit(source).path) or "download"
    return {"source": source, "revision": None, "files": [{"name": name, "url": source}]}


def fetch_file(f: Dict[str, Any], to: str, token: str) -> Dict[str, Any]:
    target = os.path.join(to, f["name"])
    if _complete(target, f):
        say("have %s (%s bytes, verified)" % (f["name"], f.get("size")))
        return {"name": f["name"], "size": os.path.getsize(target), "downloaded": 0}
    os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
    part, got, tries = target + ".part", 0, 0
    hashed = Hashed(part, bool(f.get("sha256")))
    while True:
        try:
            got += _transfer(f, part, token, hashed)
            break
        except Fatal:
            raise
        except (OSError, http.client.HTTPException) as exc:  # a drop: IncompleteRead, reset
            if getattr(exc, "errno", None) in (errno.ENOSPC, errno.EDQUOT):
                raise Fatal(
                    "disk full writing %s (%s bytes kept in %s): free space or fetch --to a "
                    "bigger disk, then run the fetch again: it resumes"
                    % (f["name"], _size(part), part)
                ) from None
            tries += 1
            if tries > RETRIES:
                raise Fatal("%s: %s after %d tries; run the fetch again to resume"
                            % (f["name"], exc, tries)) from None  # fmt: skip
            wait = BACKOFF_S * 2 ** (tries - 1)
            say("retry %d/%d of %s in %.1fs at byte %d: %s"
                % (tries, RETRIES, f["name"], wait, _size(part), exc))  # fmt: skip
            time.sleep(wait)
    _verify(f, part, hashed)
    os.replace(part, target)
    say("done %s (%d bytes)" % (f["name"], os.path.getsize(target)))
    return {"name": f["name"], "size": os.path.getsize(target), "downloaded": got}


def _transfer(f: Dict[str, Any], part: str, token: str, hashed: Hashed) -> int:
    start = _size(part)
    response = request(f["url"], token, start)
    if response is None:
        return 0
    with response:
        kind = response.headers.get("Content-Type", "")
        if "text/html" in kind and not f["name"].endswith((".html", ".htm")):
            raise Fatal("%s answered an HTML page instead of %s: a mirror's error or login page"
                        % (_strip(f["url"]), f["name"]))  # fmt: skip
        if f.get("size") is None:
            f["size"] = _published_size(response, start)
        mode = "ab" if start and response.status == 206 else "wb"
        hashed.catch_up(start if mode == "ab" else 0)
        got = _copy(response, part, mode, f, hashed)
    if f.get("size") is not None and _size(part) < int(f["size"]):
        raise ConnectionResetError("connection closed at byte %d of %s" % (_size(part), f["size"]))
    return got


def _copy(response: Any, part: str, mode: str, f: Dict[str, Any], hashed: Hashed) -> int:
    got, shown = 0, time.monotonic()
    with open(part, mode, buffering=0) as out:
        hashed.start(out)  # written (and hashed) by a thread from here
        try:
            for chunk in iter(lambda: response.read(CHUNK), b""):
                hashed.update(chunk)
                got += len(chunk)
                if time.monotonic() - shown >= PROGRESS_S:
                    shown = time.monotonic()
                    say("progress %s %d/%s bytes" % (f["name"], hashed.count, f.get("size")))
        finally:
            hashed.stop()
    return got


def _published_size(response: Any, start: int) -> Optional[int]:
    linked = response.headers.get("X-Linked-Size")
    if linked:
        return int(linked)
    whole = response.headers.get("Content-Range", "").rpartition("/")[2]
    if whole.isdigit():
        return int(whole)
    length = response.headers.get("Content-Length")
    return int(length) + (start if response.status == 206 else 0) if length else None


def _verify(f: Dict[str, Any], part: str, hashed: Hashed) -> None:
    size, want = _size(part), f.get("size")
    if want is not None and size != int(want):
        raise Fatal("%s is %d bytes, the hub publishes %s: the mirror served another file; %s "
                    "kept for inspection" % (f["name"], size, want, part))  # fmt: skip
    if f.get("sha256") and _sha256(part, hashed, size) != f["sha256"]:
        os.remove(part)  # wrong bytes cannot be resumed
        raise Fatal("%s: sha256 differs from the hub's; removed, run the fetch again" % f["name"])
    with open(part, "rb") as head:
        first = head.read(64).lstrip().lower()
    if first.startswith((b"<!doctype html", b"<html")) and not f["name"].endswith(".html"):
        raise Fatal("%s is an HTML page, not the file: the mirror answered with an error page"
                    % f["name"])  # fmt: skip


def _sha256(part: str, hashed: Hashed, size: int) -> str:
    return hashed.h.hexdigest() if hashed.count == size else _digest(part, "sha256")


def _complete(path: str, f: Dict[str, Any]) -> bool:
    if not os.path.isfile(path) or f.get("size") is None or _size(path) != int(f["size"]):
        return False
    return not f.get("sha256") or _digest(path, "sha256") == f["sha256"]


def _digest(path: str, algo: str) -> str:
    h = hashlib.new(algo)
    with open(path, "rb") as src:
        for block in iter(lambda: src.read(CHUNK), b""):
            h.update(block)
    return h.hexdigest()


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def _stdlib(args: Any, token: str) -> Dict[str, Any]:
    job = plan(args.source, args.include, token)
    if not job["files"]:
        raise Fatal("no file of %s matches --include %s" % (args.source, args.include))
    say("fetching %d file(s) of %s to %s" % (len(job["files"]), args.source, args.to))
    job["files"] = [fetch_file(f, args.to, token) for f in job["files"]]
    return job


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="rgt-fetch", description=__doc__)
    parser.add_argument("source")
    parser.add_argument("--to", required=True)
    parser.add_argument("--include", action="append", default=[])
    parser.add_argument("--token-env", default="")
    args = parser.parse_args(argv)
    token = os.environ.get(args.token_env, "") if args.token_env else ""
    try:
        accelerate("hf" if args.source.startswith("hf://") else "url")
        job = hub_fetch(args.source, args.include, args.to, token) or _stdlib(args, token)
        done = job["files"]
    except Fatal as exc:
        say("rgt-fetch: %s" % exc)
        return 1
    except OSError as exc:  # the listing itself unreachable
        say("rgt-fetch: %s: check the route (`rgt audit NAME`) and run the fetch again" % exc)
        return 1
    record = {"source": args.source, "revision": job["revision"], "files": done}
    os.makedirs(args.to, exist_ok=True)
    with open(os.path.join(args.to, RESULT), "w") as out:
        json.dump(record, out, indent=2, sort_keys=True)
    say(
        "fetched %d file(s), %d bytes transferred"
        % (len(done), sum(d["downloaded"] or 0 for d in done))
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
