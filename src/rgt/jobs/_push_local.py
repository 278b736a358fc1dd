"""The local side of ``rgt push``: what is pushed, where each file lands, its sha256, and the
CRLF check on shell scripts (they fail on the machine with ``/bin/bash^M: bad interpreter``,
usually hours later in a queue)."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from rgt._fs import CHUNK

SCRIPT_SUFFIXES = (".sh", ".bash")
NoticeFn = Callable[[str], None]


@dataclass(frozen=True)
class Source:
    """A path to push and the name it lands under: its own name, or "" for a folder given with
    a trailing slash (its contents go straight into the destination, as with rsync)."""

    path: Path
    prefix: str

    @classmethod
    def of(cls, given: str | os.PathLike[str]) -> Source:
        text = os.fspath(given)
        path = Path(text)
        contents = text.endswith(("/", os.sep)) and path.is_dir() and not path.is_symlink()
        return cls(path, "" if contents else path.name)


@dataclass(frozen=True)
class LocalFile:
    sha256: str
    size: int
    crlf_script: bool  # starts with ``#!`` and has CRLF line endings


def local_hashes(listing: Sequence[tuple[Path, str]]) -> dict[str, LocalFile]:
    return {rel: _read_local(path) for path, rel in listing}


def _read_local(path: Path) -> LocalFile:
    """One read of the file: its sha256, size, and the CRLF check for ``#!`` scripts."""
    digest = hashlib.sha256()
    size = 0
    script = crlf = False
    with path.open("rb") as handle:
        while block := handle.read(CHUNK):
            if size == 0:
                script = block.startswith(b"#!")
            crlf = crlf or (script and b"\r\n" in block)
            digest.update(block)
            size += len(block)
    return LocalFile(digest.hexdigest(), size, crlf)


def crlf_scripts(listing: Sequence[tuple[Path, str]]) -> list[str]:
    """Shell scripts by name (``*.sh``, ``*.bash``) with CRLF line endings. Other ``#!``
    scripts are caught in the hashing pass (``LocalFile.crlf_script``), which reads every
    file anyway."""
    found = []
    for path, rel in listing:
        if rel.endswith(SCRIPT_SUFFIXES):
            try:
                if b"\r\n" in path.read_bytes():
                    found.append(rel)
            except OSError:
                continue
    return found


def late_crlf(local: dict[str, LocalFile], known: list[str], notice: NoticeFn | None) -> list[str]:
    late = [rel for rel, found in local.items() if found.crlf_script and rel not in known]
    warn_crlf(late, notice)
    return late


def warn_crlf(crlf: list[str], notice: NoticeFn | None) -> None:
    if crlf and notice:
        notice(
            f"{len(crlf)} shell script(s) have Windows (CRLF) line endings and will fail on "
            f"the machine with 'bad interpreter': {', '.join(crlf[:5])}. Fix: "
            "`sed -i 's/\\r$//' FILE` (or `dos2unix FILE`) and add `*.sh text eol=lf` to "
            ".gitattributes"
        )


def local_files(sources: Sequence[Source | Path]) -> list[tuple[Path, str]]:
    """Every regular file under ``sources`` with its path as it lands in the destination
    (``dir`` becomes ``dest/dir/…``, ``dir/`` becomes ``dest/…``). Symlinks are copied as
    links by rsync and are not listed (they have no content of their own to hash)."""
    found: list[tuple[Path, str]] = []
    for given in sources:
        source = given if isinstance(given, Source) else Source(given, given.name)
        path = source.path
        if path.is_file() and not path.is_symlink():
            found.append((path, source.prefix or path.name))
        elif path.is_dir() and not path.is_symlink():
            _scan(path, source.prefix, found)
    return found


def _scan(directory: Path, rel: str, found: list[tuple[Path, str]]) -> None:
    # scandir: the directory entry already knows the file type, no extra stat per file.
    with os.scandir(directory) as entries:
        for entry in sorted(entries, key=lambda e: e.name):
            name = f"{rel}/{entry.name}" if rel else entry.name
            if entry.is_dir(follow_symlinks=False):
                _scan(Path(entry.path), name, found)
            elif entry.is_file(follow_symlinks=False):
                found.append((Path(entry.path), name))
