"""Load-verify a tree of artifacts against the manifest: the check ``pull`` and ``down`` trust.

Invariant 2: trust the artifact you loaded, not the log line that claims success. Every file is
checked for its declared size and sha256, then loaded by type (``_loaders``). The report also
names what the manifest promised but the disk lacks (``missing``) and what the disk holds but the
manifest never declared (``unexpected``: a stray partial write, a file the job forgot to
declare). Symbolic links are reported, never followed out of the root: a pulled tree must be
self-contained, and a link into ``/`` must not make ``rgt`` hash the whole machine.
"""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Callable, Collection, Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from rgt._fs import read_json, sha256_file
from rgt.errors import VerifyError
from rgt.verify._loaders import LOADERS, kind_of
from rgt.verify._loaders_tables import BadArtifact, NotChecked

MANIFEST_SCHEMA = "rgt.manifest/1"
MANIFEST_NAME = "manifest.json"
_SHA256 = re.compile(r"^[0-9a-f]{64}\Z")

Progress = Callable[["FileCheck"], None]


@dataclass(frozen=True)
class FileCheck:
    path: str  # posix, relative to the root
    kind: str  # torch | safetensors | npz | npy | json | jsonl | csv | image | parquet | other
    ok: bool
    bytes: int
    sha256: str
    detail: str  # what was found, or the failure reason


@dataclass(frozen=True)
class VerifyReport:
    root: str
    files: tuple[FileCheck, ...]
    missing: tuple[str, ...]  # in the manifest, not on disk
    unexpected: tuple[str, ...]  # on disk, not in the manifest (the manifest itself excluded)

    @property
    def ok(self) -> bool:
        return (
            bool(self.files)
            and all(f.ok for f in self.files)
            and not self.missing
            and not self.unexpected
        )

    @property
    def failures(self) -> tuple[FileCheck, ...]:
        return tuple(f for f in self.files if not f.ok)

    def to_json(self) -> dict[str, Any]:
        return {
            "root": self.root,
            "ok": self.ok,
            "files": [asdict(f) for f in self.files],
            "missing": list(self.missing),
            "unexpected": list(self.unexpected),
            "summary": {
                "files": len(self.files),
                "failed": len(self.failures),
                "bytes": sum(f.bytes for f in self.files),
            },
        }


def verify_file(
    path: Path, *, expected_sha256: str | None = None, expected_bytes: int | None = None
) -> FileCheck:
    """Size and hash against what was declared, then a load by type. Never raises for a bad file."""
    path = Path(path)
    name = path.as_posix()
    if not path.is_file():
        return FileCheck(name, "other", False, 0, "", "not a regular file")
    size = path.stat().st_size
    digest = sha256_file(str(path))
    kind = kind_of(path)
    problem = _declared_mismatch(size, digest, expected_bytes, expected_sha256)
    if problem is None:
        ok, detail = _load(path, kind, size, hash_declared=expected_sha256 is not None)
    else:
        ok, detail = False, problem
    return FileCheck(name, kind, ok, size, digest, detail)


def _declared_mismatch(
    size: int, digest: str, expected_bytes: int | None, expected_sha256: str | None
) -> str | None:
    if expected_bytes is not None and size != expected_bytes:
        return f"size mismatch: {size} bytes on disk, {expected_bytes} declared (truncated copy?)"
    if expected_sha256 is not None and digest != expected_sha256.lower():
        return f"sha256 mismatch: {digest[:12]}… on disk, {expected_sha256[:12]}… declared"
    if size == 0:
        return "empty file (0 bytes)"
    return None


def _load(path: Path, kind: str, size: int, *, hash_declared: bool) -> tuple[bool, str]:
    loader = LOADERS.get(kind)
    try:
        if loader is None:
            raise NotChecked("unknown type, not load-checked")
        return True, loader(path)
    except NotChecked as exc:
        if hash_declared:
            return True, f"{exc}; sha256 matches the manifest"
        return True, f"{exc}; no declared sha256 to compare (hash only)"
    except BadArtifact as exc:
        return False, str(exc)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return False, f"could not read as {kind}: {type(exc).__name__}: {exc}"


def verify_tree(
    root: Path,
    manifest: dict[str, Any] | None = None,
    *,
    progress: Progress | None = None,
    ignore: Collection[str] = (MANIFEST_NAME,),
) -> VerifyReport:
    """Check every file under ``root``, or every file ``manifest`` declares.

    ``progress`` is called with each ``FileCheck`` as it completes. ``ignore`` lists root-relative
    posix paths that are neither checked nor reported as unexpected (the manifest itself).
    """
    root = Path(root)
    if not root.is_dir():
        raise VerifyError(
            f"{root} is not a directory",
            path=str(root),
            fix="pass the directory the artifacts were pulled into",
        )
    on_disk, links = _scan(root, set(ignore))
    present = on_disk | set(links)
    wanted: dict[str, tuple[str | None, int | None]]
    unsafe: list[FileCheck]
    if manifest is None:
        wanted, unsafe = dict.fromkeys(present, (None, None)), []
    else:
        wanted, unsafe = _manifest_entries(manifest)
    checks: list[FileCheck] = []
    for check in _iter_checks(root, unsafe, sorted(present & set(wanted)), wanted, links):
        checks.append(check)
        if progress is not None:
            progress(check)
    missing = sorted(set(wanted) - present)
    unexpected = sorted(present - set(wanted))
    checks.sort(key=lambda check: check.path)
    return VerifyReport(str(root), tuple(checks), tuple(missing), tuple(unexpected))


def _iter_checks(
    root: Path,
    unsafe: list[FileCheck],
    paths: list[str],
    wanted: dict[str, tuple[str | None, int | None]],
    links: dict[str, str],
) -> Iterator[FileCheck]:
    yield from unsafe
    for rel in paths:
        yield _check_one(root, rel, wanted[rel], links)


def _check_one(
    root: Path, rel: str, expected: tuple[str | None, int | None], links: dict[str, str]
) -> FileCheck:
    if rel in links:
        return _link_check(root, rel, links[rel])
    sha, size = expected
    return replace(verify_file(root / rel, expected_sha256=sha, expected_bytes=size), path=rel)


def _scan(root: Path, ignore: set[str]) -> tuple[set[str], dict[str, str]]:
    """Regular files and symbolic links under root, as root-relative posix paths."""
    files: set[str] = set()
    links: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        base = Path(dirpath).relative_to(root)
        for name in [*filenames, *dirnames]:
            full = Path(dirpath) / name
            rel = (base / name).as_posix()
            if rel in ignore:
                continue
            if full.is_symlink():
                links[rel] = os.readlink(full)
            elif name in filenames:
                files.add(rel)
    return files, links


def _link_check(root: Path, rel: str, target: str) -> FileCheck:
    resolved = (root / rel).resolve()
    inside = resolved.is_relative_to(root.resolve())
    if inside and resolved.is_file():
        check = verify_file(resolved)
        detail = f"symlink to {target} inside the root; {check.detail}"
        return replace(check, path=rel, detail=detail)
    where = "inside" if inside else "outside"
    what = "a directory" if resolved.is_dir() else "nothing readable"
    return FileCheck(
        rel,
        "other",
        inside and resolved.is_dir(),
        0,
        "",
        f"symlink to {target} ({what} {where} the root); not followed",
    )


def _manifest_entries(
    manifest: dict[str, Any],
) -> tuple[dict[str, tuple[str | None, int | None]], list[FileCheck]]:
    files = manifest.get("files") if isinstance(manifest, dict) else None
    if not isinstance(files, list):
        raise VerifyError(
            "manifest has no 'files' list",
            fix="pass the agent's manifest.json (schema rgt.manifest/1)",
        )
    wanted: dict[str, tuple[str | None, int | None]] = {}
    unsafe: list[FileCheck] = []
    for index, entry in enumerate(files):
        rel, sha, size = _entry_fields(entry, index)
        reason = _unsafe_reason(rel)
        if reason is not None:
            unsafe.append(FileCheck(rel, "other", False, 0, "", f"unsafe manifest path: {reason}"))
        else:
            wanted[posixpath.normpath(rel)] = (sha, size)
    return wanted, unsafe


def _entry_fields(entry: Any, index: int) -> tuple[str, str, int]:
    if not isinstance(entry, dict):
        raise _bad_entry(index, "entry", "is not an object")
    rel, sha, size = entry.get("path"), entry.get("sha256"), entry.get("bytes")
    if not isinstance(rel, str) or not rel:
        raise _bad_entry(index, "path", "must be a non-empty string")
    if not isinstance(sha, str) or not _SHA256.match(sha.lower()):
        raise _bad_entry(index, "sha256", "must be 64 hex digits")
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise _bad_entry(index, "bytes", "must be a non-negative integer")
    return rel, sha.lower(), size


def _bad_entry(index: int, field: str, problem: str) -> VerifyError:
    return VerifyError(
        f"manifest files[{index}].{field} {problem}",
        fix="regenerate the manifest with the rgt agent; do not edit it by hand",
    )


def _unsafe_reason(rel: str) -> str | None:
    if rel.startswith("/") or re.match(r"^[A-Za-z]:[\\/]", rel):
        return "absolute path"
    if ".." in rel.replace("\\", "/").split("/"):
        return "'..' escapes the root"
    if "\x00" in rel:
        return "NUL byte in path"
    return None


def load_manifest(path: Path) -> dict[str, Any]:
    """Read a ``manifest.json``; a file that is not one raises ``VerifyError`` naming the field."""
    try:
        data = read_json(str(path))
    except (OSError, ValueError) as exc:
        raise VerifyError(
            f"cannot read manifest {path}: {exc}",
            path=str(path),
            fix="pull manifest.json again from the job directory",
        ) from exc
    if not isinstance(data, dict) or data.get("schema") != MANIFEST_SCHEMA:
        found = data.get("schema") if isinstance(data, dict) else type(data).__name__
        raise VerifyError(
            f"{path}: field 'schema' is {found!r}, expected {MANIFEST_SCHEMA!r}",
            path=str(path),
            fix="pass the manifest.json the rgt agent wrote",
        )
    _manifest_entries(data)  # validates every entry now, so errors name the file
    return data
