"""Verify a Hugging Face cache that is already on the machine (``rgt fetch NAME hf://ORG/MODEL
--verify``): every file of a snapshot against the hash its blob's name promises. Stdlib only,
Python 3.8: a fetch job runs it ON the machine, like ``downloader.py``.

The cache layout (``huggingface_hub``'s ``file_download``)::

    <cache>/models--ORG--NAME/
        blobs/<sha256 of an LFS file | git blob sha1 of a small file>
        snapshots/<commit>/<path in repo>  -> ../../blobs/<hash>   (a relative symlink)
        refs/<branch>                       the commit it points at

So each snapshot file names its expected hash: 64 hex digits are the LFS object's sha256, 40
the git blob id (sha1 of ``"blob <size>\\0"`` + content). A blob that hashes otherwise was cut,
overwritten or rotted on disk; a link with no blob was deleted from under the snapshot; a
``*.incomplete`` blob is a download that never finished. A snapshot file that is a plain file
(caches without symlinks) has no name to check against: counted as unverified, never as ok.
Links are resolved only inside the repo's own ``blobs/``: a link out of it is reported, never read.

Prints one JSON line (the report) last and writes it to ``$RGT_OUTPUT_DIR/cache-verify.json``.
Exit 0 when every file verified, 1 otherwise.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
from typing import Any

HEX64 = re.compile(r"\A[0-9a-f]{64}\Z")
HEX40 = re.compile(r"\A[0-9a-f]{40}\Z")
SOURCE = re.compile(r"\Ahf://([A-Za-z0-9][\w.-]*)/([A-Za-z0-9][\w.-]*)(?:@([\w./-]+))?\Z")
CHUNK = 1 << 20
LISTED = 20  # problems named in the report; the counts cover all of them


def cache_dir(env: dict[str, str], given: str | None) -> str:
    """Where huggingface_hub puts its cache, resolved as it does it."""
    if given:
        return given
    if env.get("HF_HUB_CACHE"):
        return env["HF_HUB_CACHE"]
    if env.get("HF_HOME"):
        return os.path.join(env["HF_HOME"], "hub")
    xdg = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(xdg, "huggingface", "hub")


def snapshots(repo_dir: str, rev: str | None) -> list[str]:
    base = os.path.join(repo_dir, "snapshots")
    if rev and not HEX40.match(rev):
        try:
            with open(os.path.join(repo_dir, "refs", rev)) as handle:
                rev = handle.read().strip()
        except OSError:
            return []
    names = sorted(os.listdir(base)) if os.path.isdir(base) else []
    return [os.path.join(base, n) for n in names if rev is None or n == rev]


def blob_hash(path: str, kind: str) -> str:
    digest = hashlib.sha256() if kind == "sha256" else hashlib.sha1()
    if kind == "sha1":
        digest.update(b"blob %d\0" % os.path.getsize(path))
    with open(path, "rb") as handle:
        chunk = handle.read(CHUNK)
        while chunk:
            digest.update(chunk)
            chunk = handle.read(CHUNK)
    return digest.hexdigest()


def check_file(path: str, blobs: str) -> str:
    """ok | bad | missing | outside | unverified | unnamed"""
    if not os.path.islink(path):
        return "unverified"
    target = os.path.realpath(path)
    if os.path.dirname(target) != os.path.realpath(blobs):
        return "outside"
    if not os.path.isfile(target):
        return "missing"
    name = os.path.basename(target)
    kind = "sha256" if HEX64.match(name) else "sha1" if HEX40.match(name) else None
    if kind is None:
        return "unnamed"
    return "ok" if blob_hash(target, kind) == name else "bad"


def verify(repo_dir: str, rev: str | None) -> dict[str, Any]:
    blobs = os.path.join(repo_dir, "blobs")
    counts: dict[str, int] = {}
    problems: list[dict[str, str]] = []
    shots = snapshots(repo_dir, rev)
    for shot in shots:
        for top, _dirs, files in os.walk(shot):  # os.walk follows no directory link
            for name in sorted(files):
                path = os.path.join(top, name)
                verdict = check_file(path, blobs)
                counts[verdict] = counts.get(verdict, 0) + 1
                if verdict != "ok" and len(problems) < LISTED:
                    problems.append({"path": os.path.relpath(path, shot), "verdict": verdict,
                                     "snapshot": os.path.basename(shot)})  # fmt: skip
    partial = [n for n in _names(blobs) if n.endswith(".incomplete")]
    return {
        "repo_dir": repo_dir,
        "snapshots": [os.path.basename(s) for s in shots],
        "counts": counts,
        "incomplete_blobs": len(partial),
        "problems": problems,
        "ok": bool(shots) and set(counts) <= {"ok"} and bool(counts) and not partial,
    }


def _names(path: str) -> list[str]:
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="cache_verify")
    parser.add_argument("source")
    parser.add_argument("--cache")
    args = parser.parse_args(argv)
    found = SOURCE.match(args.source)
    if not found:
        print(f"not hf://ORG/MODEL[@REV]: {args.source[:200]}", file=sys.stderr)
        return 2
    org, model, rev = found.groups()
    root = cache_dir(dict(os.environ), args.cache)
    repo_dir = os.path.join(root, f"models--{org}--{model}")
    report = verify(repo_dir, rev)
    report.update(source=args.source, cache=root)
    if not report["snapshots"]:
        report["error"] = f"no snapshot of {args.source} in {root}"
    _write(report)
    return 0 if report["ok"] else 1


def _write(report: dict[str, Any]) -> None:
    out = os.environ.get("RGT_OUTPUT_DIR")
    if out:
        with open(os.path.join(out, "cache-verify.json"), "w") as handle:
            json.dump(report, handle, sort_keys=True)
    print(json.dumps(report, sort_keys=True), flush=True)


if __name__ == "__main__":
    sys.exit(main())
