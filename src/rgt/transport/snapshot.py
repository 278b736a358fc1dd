"""Immutable code snapshots: which files of a project are code, and their content hash.

A launch copies the project into ``code/<hash>/`` on the machine, where ``hash`` is derived
from every file's relative path, mode bit and content, so the same tree always lands in the
same folder and a later push can never change the files a running job reads (invariant 6).
Files are chosen the way git would: ``git ls-files`` in a repository (tracked plus untracked
but not ignored), else a walk that honours ``.gitignore``/``.rgtignore`` name patterns.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from rgt.errors import UsageError
from rgt.transport._ignored import name_matches

ALWAYS_SKIP = (
    ".git",
    ".venv",
    "venv",
    "__pycache__",
    ".mypy_cache",
    ".ruff_cache",
    ".pytest_cache",
    ".rgt",
    "*.pyc",
    ".DS_Store",
)
IGNORE_FILES = (".gitignore", ".rgtignore")
MAX_SNAPSHOT_BYTES = 512 * 1024 * 1024


@dataclass(frozen=True)
class SnapshotFile:
    rel: str  # posix path relative to the project root
    size: int
    executable: bool


@dataclass(frozen=True)
class Snapshot:
    root: Path
    files: tuple[SnapshotFile, ...]
    digest: str

    @property
    def total_bytes(self) -> int:
        return sum(f.size for f in self.files)


def take_snapshot(root: Path) -> Snapshot:
    """Select the code files under ``root`` and hash them. Reads, never writes."""
    root = root.resolve()
    if not root.is_dir():
        raise UsageError(f"{root} is not a directory", fix="run from your project directory")
    rels = _git_files(root)
    if rels is None:
        rels = _walk_files(root)
    rels += _reincluded(root)
    files = tuple(_describe(root, rel) for rel in sorted(set(rels)))
    total = sum(f.size for f in files)
    if total > MAX_SNAPSHOT_BYTES:
        raise UsageError(
            f"the code snapshot of {root} is {total / 2**20:.0f} MiB",
            fix="data and checkpoints don't belong in the code snapshot: list them in "
            ".rgtignore and push data with `rgt push`",
        )
    return Snapshot(root=root, files=files, digest=_digest(root, files))


def _reincluded(root: Path) -> list[str]:
    """``!PATTERN`` lines of .rgtignore take back files .gitignore left out."""
    from rgt.transport._ignored import reincluded

    patterns = _ignore_patterns(root / ".rgtignore")
    return [r for r in reincluded(root) if not _ignored(r, patterns)]


def _git_files(root: Path) -> list[str] | None:
    try:
        proc = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=root,
            capture_output=True,
            check=False,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0:
        return None
    rels = [r for r in proc.stdout.decode("utf-8", "surrogateescape").split("\0") if r]
    patterns = _ignore_patterns(root / ".rgtignore")
    return [r for r in rels if (root / r).is_file() and not _ignored(r, patterns)]


def _walk_files(root: Path) -> list[str]:
    patterns: list[str] = []
    for name in IGNORE_FILES:
        patterns += _ignore_patterns(root / name)
    found: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        prefix = "" if rel_dir == "." else rel_dir.replace(os.sep, "/") + "/"
        dirnames[:] = sorted(d for d in dirnames if not _ignored(prefix + d, patterns))
        for name in filenames:
            rel = prefix + name
            if not _ignored(rel, patterns) and os.path.isfile(os.path.join(dirpath, name)):
                found.append(rel)
    return found


def _ignore_patterns(path: Path) -> list[str]:
    if not path.is_file():
        return []
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    kept = [ln.strip().rstrip("/") for ln in lines if ln.strip() and not ln.startswith("#")]
    return [ln for ln in kept if not ln.startswith("!")]  # `!` takes back: rgt.transport._ignored


def _ignored(rel: str, patterns: list[str]) -> bool:
    return name_matches(rel, [*ALWAYS_SKIP, *patterns])


def _describe(root: Path, rel: str) -> SnapshotFile:
    stat = (root / rel).stat()
    return SnapshotFile(rel=rel, size=stat.st_size, executable=bool(stat.st_mode & 0o111))


def _digest(root: Path, files: tuple[SnapshotFile, ...]) -> str:
    outer = hashlib.sha256()
    for item in files:
        inner = hashlib.sha256((root / item.rel).read_bytes()).hexdigest()
        outer.update(
            f"{item.rel}\0{int(item.executable)}\0{inner}\n".encode("utf-8", "surrogateescape")
        )
    return outer.hexdigest()[:20]


def materialize(snapshot: Snapshot, dest: Path) -> None:
    """Copy the snapshot's files into ``dest`` (a fresh dir) and make them read-only."""
    tmp = dest.with_name(dest.name + ".partial")
    if tmp.exists():
        _make_writable(tmp)
        import shutil

        shutil.rmtree(tmp)
    for item in snapshot.files:
        target = tmp / item.rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes((snapshot.root / item.rel).read_bytes())
        target.chmod(0o555 if item.executable else 0o444)
    tmp.mkdir(parents=True, exist_ok=True)
    os.replace(tmp, dest)


# A job that wrote a hard-linked snapshot file in place (as root) leaves ``<hash>.damaged``
# next to the snapshot (rgt.agent._workdir). The next push moves the damaged copy aside, where
# running jobs' files still live, and uploads the snapshot again.
_RETIRE = (
    'm="$1.damaged"; [ -e "$m" ] || exit 0; t="$1.damaged-$(date +%Y%m%d-%H%M%S)-$$"; '
    'if [ -e "$1" ]; then mv -T -- "$1" "$t" || exit 1; fi; mv -- "$m" "$t.json"'
)


def retire_damaged_argv(remote: str) -> list[str]:
    """argv (for any transport) that moves a damaged snapshot ``remote`` aside, if it is."""
    return ["sh", "-c", _RETIRE, "sh", remote]


def _make_writable(path: Path) -> None:
    for dirpath, _dirs, filenames in os.walk(path):
        os.chmod(dirpath, 0o755)
        for name in filenames:
            os.chmod(os.path.join(dirpath, name), 0o644)
