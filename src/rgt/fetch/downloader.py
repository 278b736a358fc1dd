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
  over stdin), never from argv, and follows a redirect only to the same scheme, host and port
  (or to the hub itself): ``fetch_aids.SameOrigin``. The result is ``DIR/.rgt-fetch.json``.
- Every name (a hub's ``rfilename``, a URL's last segment) is checked by ``_confine`` (shipped
  next to this file) before anything is written, and every file is written through a held
  directory descriptor that follows no link: nothing lands outside ``--to``.
- Caps: a file stops at its published size; ``--max-bytes N`` refuses a larger file and cuts a
  body at N; a body that declares no length is cut at ``UNSIZED_CAP`` (16 GiB). A cut body's
  partial file is removed. ``--sha256 HEX`` checks a URL's file (a hub publishes its own).
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
import http.client
import json
import os
import re
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Dict, List, Optional

if __package__:
    from rgt._confine import UnsafeNameError, Within, safe_name, within
    from rgt.fetch.fetch_aids import Fatal, Hashed, SameOrigin, accelerate, hub_fetch, say
    from rgt.fetch.fetch_body import (
        Overflow,
        check_cap,
        complete,
        copy_capped,
        published_size,
        verify,
    )
else:  # run as a script from the fetch job's snapshot, where its parts lie next to it
    HERE = os.path.dirname(os.path.abspath(__file__))
    if not os.path.exists(os.path.join(HERE, "_confine.py")):  # run from rgt's source tree
        sys.path.append(os.path.dirname(HERE))
    from _confine import UnsafeNameError, Within, safe_name, within  # type: ignore
    from fetch_aids import Fatal, Hashed, SameOrigin, accelerate, hub_fetch, say  # type: ignore
    from fetch_body import (  # type: ignore
        Overflow,
        check_cap,
        complete,
        copy_capped,
        published_size,
        verify,
    )

RETRIES = int(os.environ.get("RGT_FETCH_RETRIES", "5"))
BACKOFF_S = float(os.environ.get("RGT_FETCH_BACKOFF_S", "2"))
RESULT = ".rgt-fetch.json"
LISTING_CAP = 64 << 20  # a hub's JSON file list (a 100k-file repo's is about 20 MB)


def request(url: str, token: str, start: int = 0, method: str = "GET") -> Any:
    headers = {"User-Agent": "rgt-fetch/1"}
    if token:
        headers["Authorization"] = "Bearer " + token
    if start:
        headers["Range"] = "bytes=%d-" % start
    try:
        opener = urllib.request.build_opener(SameOrigin())  # proxies from the env as it is now
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
        body = response.read(LISTING_CAP + 1)
    if len(body) > LISTING_CAP:
        raise Fatal("%s sent a file list over %d bytes: not a hub's answer"
                    % (_strip(url), LISTING_CAP))  # fmt: skip
    try:
        info = json.loads(body.decode("utf-8"))
    except ValueError:
        raise Fatal(
            "%s answered %r… instead of the repo's JSON: the endpoint is not a Hugging Face hub "
            "(check HF_ENDPOINT / `rgt up --mirror hf=URL`)" % (_strip(url), body[:40])
        ) from None
    return info  # type: ignore[no-any-return]


def plan(
    source: str,
    includes: List[str],
    token: str,
    to: str = ".",
    sha256: Optional[str] = None,
    max_bytes: Optional[int] = None,
) -> Dict[str, Any]:
    """The files to fetch; every name is checked (``_confine``) before anything is written."""
    if source.startswith("hf://"):
        repo, _sep, rev = source[5:].partition("@")
        endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")
        info = hf_files(endpoint, repo, rev or "main", token)
        commit = info.get("sha") or rev or "main"
        files = []
        for s in info.get("siblings") or []:
            s = s if isinstance(s, dict) else {"rfilename": s}
            if includes and not any(fnmatch.fnmatch(str(s.get("rfilename")), p) for p in includes):
                continue
            name = safe_name(s.get("rfilename"), what="the hub's file name", dest=to)
            lfs = s.get("lfs") or {}
            url = "%s/%s/resolve/%s/%s" % (endpoint, repo, commit, urllib.parse.quote(name))
            files.append(
                {"name": name, "url": url, "size": lfs.get("size", s.get("size")),
                 "sha256": lfs.get("sha256"), "blob_id": s.get("blobId"), "max_bytes": max_bytes}
            )  # fmt: skip
        return {"source": source, "revision": commit, "files": files}
    name = os.path.basename(urllib.parse.urlsplit(source).path) or "download"
    name = safe_name(name, what="the URL's file name", dest=to)
    f = {"name": name, "url": source, "sha256": sha256, "max_bytes": max_bytes}
    return {"source": source, "revision": None, "files": [f]}


def fetch_file(f: Dict[str, Any], to: str, token: str) -> Dict[str, Any]:
    """One file into ``to`` through a held directory descriptor (``_confine.within``): no link
    on the way or at the name is followed, even one swapped in while the file downloads."""
    os.makedirs(to, exist_ok=True)  # --to itself: the user's choice, links allowed
    place, leaf = within(to, f["name"])
    with place:
        return _fetch_at(f, place, leaf, token)


def _fetch_at(f: Dict[str, Any], place: Within, leaf: str, token: str) -> Dict[str, Any]:
    if complete(place, leaf, f):
        say("have %s (%s bytes, verified)" % (f["name"], f.get("size")))
        return {"name": f["name"], "size": place.size(leaf), "downloaded": 0}
    check_cap(f, f.get("size"))
    part, got, tries = leaf + ".part", 0, 0
    hashed = Hashed(lambda: place.open(part, "rb"), bool(f.get("sha256")))
    while True:
        try:
            got += _transfer(f, place, part, token, hashed)
            break
        except Overflow:
            place.remove(part)  # bytes past a cap are not a file to resume
            raise
        except Fatal:
            raise
        except (OSError, http.client.HTTPException) as exc:  # a drop: IncompleteRead, reset
            _fatal_write(exc, f, place, part)
            tries += 1
            if tries > RETRIES:
                raise Fatal("%s: %s after %d tries; run the fetch again to resume"
                            % (f["name"], exc, tries)) from None  # fmt: skip
            wait = BACKOFF_S * 2 ** (tries - 1)
            say("retry %d/%d of %s in %.1fs at byte %d: %s"
                % (tries, RETRIES, f["name"], wait, place.size(part), exc))  # fmt: skip
            time.sleep(wait)
    verify(f, place, part, hashed)
    place.replace(part, leaf)
    say("done %s (%d bytes)" % (f["name"], place.size(leaf)))
    return {"name": f["name"], "size": place.size(leaf), "downloaded": got}


def _fatal_write(exc: BaseException, f: Dict[str, Any], place: Within, part: str) -> None:
    """A local write no retry can help: a full disk, a link planted at the part file."""
    code = getattr(exc, "errno", None)
    if code in (errno.ENOSPC, errno.EDQUOT):
        raise Fatal(
            "disk full writing %s (%s bytes kept in %s): free space or fetch --to a "
            "bigger disk, then run the fetch again: it resumes"
            % (f["name"], place.size(part), part)
        ) from None
    if code == errno.ELOOP:
        raise Fatal("%s.part is a symbolic link in the destination; not written through: "
                    "remove it and run the fetch again" % f["name"]) from None  # fmt: skip


def _transfer(f: Dict[str, Any], place: Within, part: str, token: str, hashed: Hashed) -> int:
    start = place.size(part)
    response = request(f["url"], token, start)
    if response is None:
        return 0
    with response:
        kind = response.headers.get("Content-Type", "")
        if "text/html" in kind and not f["name"].endswith((".html", ".htm")):
            raise Fatal("%s answered an HTML page instead of %s: a mirror's error or login page"
                        % (_strip(f["url"]), f["name"]))  # fmt: skip
        if f.get("size") is None:
            f["size"] = published_size(response, start)
            check_cap(f, f["size"])
        offset = start if start and response.status == 206 else 0
        hashed.catch_up(offset)
        got = copy_capped(
            response, place.open(part, "ab" if offset else "wb", 0), offset, f, hashed
        )
    if f.get("size") is not None and place.size(part) < int(f["size"]):
        have = place.size(part)
        raise ConnectionResetError("connection closed at byte %d of %s" % (have, f["size"]))
    return got


def _stdlib(args: Any, token: str) -> Dict[str, Any]:
    job = plan(args.source, args.include, token, args.to, args.sha256, args.max_bytes)
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
    parser.add_argument("--sha256", default=None)
    parser.add_argument("--max-bytes", type=int, default=None)
    args = parser.parse_args(argv)
    token = os.environ.get(args.token_env, "") if args.token_env else ""
    try:
        _check_args(args)
        accelerate("hf" if args.source.startswith("hf://") else "url")
        # --max-bytes is the stdlib path's (the library checks sizes against its own metadata)
        library = None if args.max_bytes else hub_fetch(args.source, args.include, args.to, token)
        job = library or _stdlib(args, token)
        _record(args, job)
    except (Fatal, UnsafeNameError) as exc:
        fix = getattr(exc, "fix", "")
        say("rgt-fetch: %s%s" % (exc, "; " + fix if fix else ""))
        return 1
    except OSError as exc:  # the listing itself unreachable
        say("rgt-fetch: %s: check the route (`rgt audit NAME`) and run the fetch again" % exc)
        return 1
    done = job["files"]
    say(
        "fetched %d file(s), %d bytes transferred"
        % (len(done), sum(d["downloaded"] or 0 for d in done))
    )
    return 0


def _check_args(args: Any) -> None:
    if args.sha256 is not None and not re.fullmatch(r"[0-9a-fA-F]{64}", args.sha256):
        raise Fatal("--sha256 takes 64 hex digits, got %r" % args.sha256[:80])
    if args.sha256 is not None and args.source.startswith("hf://"):
        raise Fatal("--sha256 is for a URL: a hub repo publishes each file's sha256 itself")
    if args.max_bytes is not None and args.max_bytes <= 0:
        raise Fatal("--max-bytes takes a positive number of bytes")


def _record(args: Any, job: Dict[str, Any]) -> None:
    """``DIR/.rgt-fetch.json``, written through the destination's descriptor (no link)."""
    record = {"source": args.source, "revision": job["revision"], "files": job["files"]}
    os.makedirs(args.to, exist_ok=True)
    place, leaf = within(args.to, RESULT)
    with place:
        with place.open(leaf + ".tmp", "w") as out:
            json.dump(record, out, indent=2, sort_keys=True)
        place.replace(leaf + ".tmp", leaf)


if __name__ == "__main__":
    sys.exit(main())
