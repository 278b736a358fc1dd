"""Collect a sweep's verified results on a shared filesystem, ON the machines (``aggregate =
"/shared/path"`` in the sweep file). Stdlib only, Python 3.8: rgt sends this file as the
program of ``python3 - MODE ROOT`` and the cells as one JSON line after it, so nothing is
installed and the results never travel through the laptop.

``collect``: for each cell (``job_dir``, the agent's job directory on this machine) whose job
finished with ``DONE`` (the agent re-read and hashed every artifact before writing it), copy
every file of its ``manifest.json`` to ``ROOT/cells/<cell-id>/`` (a temp file, hashed while
copied, renamed only when its sha256 is the manifest's), keep a copy already there whose hash
matches, and write ``VERIFIED`` last. A manifest path that is absolute or climbs out is
refused, and so is a source that is a link.

``reconcile``: from the cells' states (as rgt observed them) and what is really on the shared
path (``VERIFIED`` markers), write ``ROOT/sweep.json`` (one row per cell: done, or why not) and
``ROOT/by-group/<group>/<cell-id>/results.json`` links for `rgt verify compare`.

Prints one JSON line: the result.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from typing import Any

CHUNK = 1 << 20
MARKER = "VERIFIED"


def _safe(rel: str) -> bool:
    parts = rel.split("/")
    return bool(rel) and not rel.startswith("/") and all(p not in ("", ".", "..") for p in parts)


def _hash(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        chunk = handle.read(CHUNK)
        while chunk:
            digest.update(chunk)
            chunk = handle.read(CHUNK)
    return digest.hexdigest()


def _copy(src: str, dest: str, sha: str) -> bool:
    """Copy ``src`` to ``dest`` through a temp file; True only if the bytes hash to ``sha``."""
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    tmp = f"{dest}.rgt-tmp-{os.getpid()}"
    digest = hashlib.sha256()
    fd = os.open(src, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    with os.fdopen(fd, "rb") as source, open(tmp, "wb") as target:
        chunk = source.read(CHUNK)
        while chunk:
            digest.update(chunk)
            target.write(chunk)
            chunk = source.read(CHUNK)
        target.flush()
        os.fsync(target.fileno())
    if digest.hexdigest() != sha:
        os.unlink(tmp)
        return False
    os.replace(tmp, dest)
    return True


def collect_cell(root: str, cell: dict[str, Any]) -> dict[str, Any]:
    job_dir, cid = cell["job_dir"], cell["cell_id"]
    row: dict[str, Any] = {"cell_id": cid, "ok": False, "copied": 0, "kept": 0, "bad": []}
    if not os.path.isfile(os.path.join(job_dir, "DONE")):
        return dict(row, error="the job has no DONE marker: its artifacts were not verified")
    with open(os.path.join(job_dir, "manifest.json")) as handle:
        manifest = json.load(handle)
    dest = os.path.join(root, "cells", cid)
    marker = os.path.join(dest, MARKER)
    if os.path.exists(marker):
        os.unlink(marker)  # re-checked below; written again only when all is well
    for entry in manifest.get("files") or []:
        rel, sha = str(entry.get("path")), str(entry.get("sha256"))
        target = os.path.join(dest, rel)
        if not _safe(rel):
            row["bad"].append({"path": rel[:200], "why": "unsafe path"})
        elif os.path.isfile(target) and not os.path.islink(target) and _hash(target) == sha:
            row["kept"] += 1
        elif _copy(os.path.join(job_dir, rel), target, sha):
            row["copied"] += 1
        else:
            row["bad"].append({"path": rel, "why": "sha256 differs from the manifest"})
    row["files"] = row["copied"] + row["kept"]
    row["runtime"] = _runtime(job_dir, dest)
    if not row["bad"]:
        _write_json(os.path.join(dest, "manifest.json"), manifest)
        _write_json(marker, {"time": time.time(), "job_id": cell.get("job_id"),
                             "files": row["files"]})  # fmt: skip
        row["ok"] = True
    return row


def _runtime(job_dir: str, dest: str) -> bool:
    """The job's run-time capture (``runtime.json``: the knobs it resolved, rgt.verify.runtime)
    beside the cell as ``rgt-runtime.json``; job metadata, so copied only when it is JSON."""
    source = os.path.join(job_dir, "runtime.json")
    try:
        if os.path.islink(source) or os.path.getsize(source) > (1 << 20):
            return False
        with open(source, "rb") as handle:
            raw = handle.read()
        json.loads(raw)
    except (OSError, ValueError):
        return False
    os.makedirs(dest, exist_ok=True)
    tmp = os.path.join(dest, f".rgt-runtime.tmp-{os.getpid()}")
    with open(tmp, "wb") as handle:
        handle.write(raw)
    os.replace(tmp, os.path.join(dest, "rgt-runtime.json"))
    return True


def reconcile(root: str, cells: list[dict[str, Any]], name: str) -> dict[str, Any]:
    rows = []
    for cell in cells:
        cdir = os.path.join(root, "cells", cell["cell_id"])
        verified = os.path.isfile(os.path.join(cdir, MARKER))
        row = dict(cell, verified=verified, state="done" if verified else cell.get("state"))
        row["results"] = _results(cdir) if verified else None
        if row["results"]:
            _link(root, cell, row["results"])
        row.pop("job_dir", None)
        rows.append(row)
    doc = {"schema": "rgt.sweep/1", "sweep": name, "dest": root, "time": time.time(),
           "cells": rows, "ok": all(r["verified"] for r in rows if r.get("pullable"))}  # fmt: skip
    _write_json(os.path.join(root, "sweep.json"), doc)
    return doc


def _results(cdir: str) -> str | None:
    found = []
    for top, _dirs, files in os.walk(cdir):
        if "results.json" in files:
            found.append(os.path.join(top, "results.json"))
    found.sort(key=lambda p: (p.count(os.sep), p))
    return found[0] if found else None


def _link(root: str, cell: dict[str, Any], results: str) -> None:
    folder = os.path.join(root, "by-group", cell["slug"], cell["cell_id"])
    os.makedirs(folder, exist_ok=True)
    link = os.path.join(folder, "results.json")
    relative = os.path.relpath(results, folder)
    _symlink(link, relative)
    runtime = os.path.join(root, "cells", cell["cell_id"], "rgt-runtime.json")
    if os.path.isfile(runtime):
        _symlink(os.path.join(folder, "rgt-runtime.json"), os.path.relpath(runtime, folder))


def _symlink(link: str, relative: str) -> None:
    if os.path.islink(link) and os.readlink(link) == relative:
        return
    if os.path.lexists(link):
        os.unlink(link)
    os.symlink(relative, link)


def _write_json(path: str, doc: Any) -> None:
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w") as handle:
        json.dump(doc, handle, sort_keys=True)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def main(argv: list[str], line: str) -> int:
    mode, root = argv[0], argv[1]
    doc = json.loads(line)
    os.makedirs(root, exist_ok=True)
    if mode == "collect":
        result: Any = [collect_cell(root, cell) for cell in doc["cells"]]
    else:
        result = reconcile(root, doc["cells"], doc["name"])
    print(json.dumps({"result": result}), flush=True)
    return 0


def run(line: str) -> int:
    """The entry point rgt appends: ``python3 - MODE ROOT`` with the cells in ``line``."""
    return main(sys.argv[1:], line)
