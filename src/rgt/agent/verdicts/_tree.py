"""A tree of artifacts: every file's verdict, every checkpoint folder's, what is missing and what
is unexpected.

With a manifest, the manifest is the roster: what it lists but the disk lacks is ``missing``,
and (when the root is scanned) what the disk holds but it never declared is ``unexpected``.
The agent does not scan (a job's folder holds logs, code and caches besides its artifacts);
``pull`` and ``rgt verify artifacts`` do. Symbolic links are reported, never followed out of the
root: a pulled tree must be self-contained.
"""

from __future__ import annotations

import os
import posixpath
from dataclasses import replace
from typing import Any, Callable, Collection, Dict, List, Optional, Sequence, Tuple

from rgt.agent.verdicts import _layouts
from rgt.agent.verdicts._file import check_path
from rgt.agent.verdicts._records import BAD, OK, FileVerdict, TreeVerdict

Progress = Callable[[FileVerdict], None]
Wanted = Dict[str, Tuple[Optional[str], Optional[int]]]


def check_tree(
    root: "str | os.PathLike[str]",
    manifest_files: Optional[Sequence[Dict[str, Any]]] = None,
    *,
    progress: Optional[Progress] = None,
    ignore: Collection[str] = (),
    scan: bool = True,
) -> TreeVerdict:
    """Judge every file under ``root`` (or every file ``manifest_files`` lists: entries with
    ``path``, ``sha256``, ``bytes``). ``ignore``: root-relative paths neither checked nor
    unexpected. ``scan=False``: look only at the listed files."""
    top = os.fspath(root)
    files, links = _scan(top, set(ignore)) if scan or manifest_files is None else (set(), {})
    wanted, unsafe = _wanted(manifest_files, files | set(links))
    if not scan and manifest_files is not None:
        files = {rel for rel in wanted if os.path.isfile(os.path.join(top, rel))}
    present = files | set(links)
    units = _layouts.find_units(top, sorted(present & set(wanted)))
    unit_of = {rel: folder for folder, (_, rels) in units.items() for rel in rels}
    verdicts = list(unsafe)
    for rel in sorted(present & set(wanted)):
        verdict = _one(top, rel, wanted[rel], links, unit_of.get(rel))
        verdicts.append(verdict)
        if progress is not None:
            progress(verdict)
    by_path = {v.path: v for v in verdicts}
    judged = tuple(
        _layouts.judge(top, folder, layout, [by_path[r] for r in rels if r in by_path])
        for folder, (layout, rels) in sorted(units.items())
    )
    missing = tuple(sorted(set(wanted) - present))
    unexpected = tuple(sorted(present - set(wanted))) if scan else ()
    return TreeVerdict(tuple(sorted(verdicts, key=lambda v: v.path)), judged, missing, unexpected)


def _wanted(
    entries: Optional[Sequence[Dict[str, Any]]], present: Collection[str]
) -> Tuple[Wanted, List[FileVerdict]]:
    if entries is None:
        return {rel: (None, None) for rel in present}, []
    wanted: Wanted = {}
    unsafe: List[FileVerdict] = []
    for entry in entries:
        rel = str(entry.get("path"))
        reason = unsafe_reason(rel)
        if reason is not None:
            unsafe.append(FileVerdict(rel, "other", BAD, 0, "", "unsafe manifest path: " + reason))
        else:
            wanted[posixpath.normpath(rel)] = (entry.get("sha256"), entry.get("bytes"))
    return wanted, unsafe


def unsafe_reason(rel: str) -> Optional[str]:
    if rel.startswith("/") or (len(rel) > 2 and rel[1] == ":" and rel[2] in "\\/"):
        return "absolute path"
    if ".." in rel.replace("\\", "/").split("/"):
        return "'..' escapes the root"
    if "\x00" in rel:
        return "NUL byte in path"
    return None


def _one(
    root: str,
    rel: str,
    want: Tuple[Optional[str], Optional[int]],
    links: Dict[str, str],
    unit: Optional[str],
) -> FileVerdict:
    if rel in links:
        return _link(root, rel, links[rel], unit)
    sha, size = want
    return check_path(os.path.join(root, rel), rel, sha, size, unit)


def _scan(root: str, ignore: Collection[str]) -> Tuple[set, Dict[str, str]]:  # type: ignore[type-arg]
    """Regular files and symbolic links under root, as root-relative posix paths."""
    files = set()
    links: Dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        base = os.path.relpath(dirpath, root).replace(os.sep, "/")
        for name in filenames + dirnames:
            rel = name if base == "." else base + "/" + name
            if rel in ignore:
                continue
            full = os.path.join(dirpath, name)
            if os.path.islink(full):
                links[rel] = os.readlink(full)
            elif name in filenames:
                files.add(rel)
    return files, links


def _link(root: str, rel: str, target: str, unit: Optional[str]) -> FileVerdict:
    resolved = os.path.realpath(os.path.join(root, rel))
    top = os.path.realpath(root)
    inside = resolved == top or resolved.startswith(top.rstrip(os.sep) + os.sep)
    if inside and os.path.isfile(resolved):
        check = check_path(resolved, rel, None, None, unit)
        return replace(check, detail="symlink to %s inside the root; %s" % (target, check.detail))
    where = "inside" if inside else "outside"
    what = "a directory" if os.path.isdir(resolved) else "nothing readable"
    verdict = OK if inside and os.path.isdir(resolved) else BAD
    detail = "symlink to %s (%s %s the root); not followed" % (target, what, where)
    return FileVerdict(rel, "other", verdict, 0, "", detail, unit)
