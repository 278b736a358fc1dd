"""Load-verify a tree of artifacts against the manifest: the check ``pull`` and ``down`` trust.

Invariant 2: trust the artifact you loaded, not the log line that claims success. The verdicts
come from ``rgt.agent.verdicts``, the same stdlib verifier the agent runs on the machine when a job
ends, so "N ok" in ``rgt watch`` and in ``pull`` mean the same: ``ok`` (loaded, content checked),
``hash_only`` (bytes match the manifest; the format cannot be checked without running the
machine's code, e.g. a pickle naming a class), ``bad``. This module adapts them to the report
``pull``, the gate and ``rgt verify artifacts`` print and store, and validates the manifest.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rgt._fs import read_json
from rgt.agent.verdicts import BAD, FileVerdict, UnitVerdict, check_file, check_tree
from rgt.errors import VerifyError

MANIFEST_SCHEMA = "rgt.manifest/1"
MANIFEST_NAME = "manifest.json"
RUNTIME_NAME = "rgt-runtime.json"  # the job's run-time capture a pull keeps (rgt.verify.runtime)
_SHA256 = re.compile(r"^[0-9a-f]{64}\Z")

Progress = Callable[["FileCheck"], None]


@dataclass(frozen=True)
class FileCheck:
    path: str  # posix, relative to the root
    kind: str  # torch | pickle | safetensors | npz | npy | dcp | json | jsonl | csv | image | ...
    ok: bool  # the verdict satisfies the gate (ok or hash_only)
    bytes: int
    sha256: str
    detail: str  # what was found, or the failure reason
    verdict: str = "ok"  # ok | hash_only | bad
    unit: str | None = None  # the checkpoint folder it belongs to

    @classmethod
    def of(cls, v: FileVerdict) -> FileCheck:
        return cls(v.path, v.kind, v.verdict != BAD, v.bytes, v.sha256, v.detail, v.verdict, v.unit)


@dataclass(frozen=True)
class VerifyReport:
    root: str
    files: tuple[FileCheck, ...]
    missing: tuple[str, ...]  # in the manifest, not on disk
    unexpected: tuple[str, ...]  # on disk, not in the manifest (the manifest itself excluded)
    units: tuple[UnitVerdict, ...] = ()

    @property
    def ok(self) -> bool:
        return (
            bool(self.files)
            and all(f.ok for f in self.files)
            and all(u.verdict != BAD for u in self.units)
            and not self.missing
            and not self.unexpected
        )

    @property
    def failures(self) -> tuple[FileCheck, ...]:
        return tuple(f for f in self.files if not f.ok)

    def counts(self) -> dict[str, int]:
        verdicts = [f.verdict for f in self.files]
        return {v: verdicts.count(v) for v in ("ok", "hash_only", "bad")}

    def to_json(self) -> dict[str, Any]:
        return {
            "root": self.root,
            "ok": self.ok,
            "files": [asdict(f) for f in self.files],
            "units": [asdict(u) for u in self.units],
            "missing": list(self.missing),
            "unexpected": list(self.unexpected),
            "summary": {
                "files": len(self.files),
                **self.counts(),
                "failed": len(self.failures),
                "bytes": sum(f.bytes for f in self.files),
            },
        }


def verify_file(
    path: Path, *, expected_sha256: str | None = None, expected_bytes: int | None = None
) -> FileCheck:
    """Size and hash against what was declared, then the format's own check. Never raises."""
    return FileCheck.of(check_file(path, sha256=expected_sha256, size=expected_bytes))


def verify_tree(
    root: Path,
    manifest: dict[str, Any] | None = None,
    *,
    progress: Progress | None = None,
    ignore: Collection[str] = (MANIFEST_NAME, RUNTIME_NAME),
) -> VerifyReport:
    """Check every file under ``root``, or every file ``manifest`` declares (and report what is
    missing or unexpected). ``progress`` gets each ``FileCheck`` as it completes."""
    root = Path(root)
    if not root.is_dir():
        raise VerifyError(
            f"{root} is not a directory",
            path=str(root),
            fix="pass the directory the artifacts were pulled into",
        )
    entries = None if manifest is None else _manifest_entries(manifest)

    def tell(verdict: FileVerdict) -> None:
        if progress is not None:
            progress(FileCheck.of(verdict))

    tree = check_tree(root, entries, progress=tell, ignore=ignore)
    checks = tuple(FileCheck.of(v) for v in tree.files)
    return VerifyReport(str(root), checks, tree.missing, tree.unexpected, tree.units)


def _manifest_entries(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    files = manifest.get("files") if isinstance(manifest, dict) else None
    if not isinstance(files, list):
        raise VerifyError(
            "manifest has no 'files' list",
            fix="pass the agent's manifest.json (schema rgt.manifest/1)",
        )
    for index, entry in enumerate(files):
        _entry_fields(entry, index)
    return [dict(e, sha256=e["sha256"].lower()) for e in files]


def _entry_fields(entry: Any, index: int) -> None:
    if not isinstance(entry, dict):
        raise _bad_entry(index, "entry", "is not an object")
    rel, sha, size = entry.get("path"), entry.get("sha256"), entry.get("bytes")
    if not isinstance(rel, str) or not rel:
        raise _bad_entry(index, "path", "must be a non-empty string")
    if not isinstance(sha, str) or not _SHA256.match(sha.lower()):
        raise _bad_entry(index, "sha256", "must be 64 hex digits")
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise _bad_entry(index, "bytes", "must be a non-negative integer")


def _bad_entry(index: int, field: str, problem: str) -> VerifyError:
    return VerifyError(
        f"manifest files[{index}].{field} {problem}",
        fix="regenerate the manifest with the rgt agent; do not edit it by hand",
    )


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
