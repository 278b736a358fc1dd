"""``rgt push NAME [PATHS…] [--to DIR]``: code into an immutable snapshot, data anywhere.

Without paths, the project (the current directory) is pushed as a code snapshot to
``code/<content-hash>/`` — the files ``git`` would track plus untracked ones not ignored, minus
``.rgtignore`` — so a later push never changes what a running job reads. With paths, each one
is pushed (resumably) under ``--to`` (default ``<durable>/data``; a relative ``--to`` is under
the durable root) with rsync's rule: ``data`` lands as ``<to>/data/…``, ``data/`` (a trailing
slash) puts the folder's contents into ``<to>/…``. Either way:

- shell scripts with CRLF line endings are reported *before* the transfer: on the box they fail
  with ``/bin/bash^M: bad interpreter``, usually hours later in a queue;
- after the transfer every file is hashed on the machine and compared with the local sha256;
  the report is the manifest of what arrived, and a mismatch is an error, not a warning.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rgt._fs import CHUNK
from rgt.errors import UsageError, VerifyError
from rgt.jobs.remote_hash import HashAsItLands, remote_sha256
from rgt.jobs.snapshot import Snapshot, take_snapshot
from rgt.jobs.store import Store
from rgt.transport.base import ProgressFn

SCRIPT_SUFFIXES = (".sh", ".bash")
NoticeFn = Callable[[str], None]


@dataclass(frozen=True)
class PushedFile:
    path: str  # relative to ``remote``
    bytes: int
    sha256: str


@dataclass(frozen=True)
class PushReport:
    machine: str
    kind: str  # "code" or "data"
    remote: str
    files: tuple[PushedFile, ...]
    crlf_scripts: tuple[str, ...] = ()
    snapshot: str | None = None
    attempts: int = 1
    sent_bytes: int | None = None  # file data rsync put on the wire, over every attempt
    matched_bytes: int | None = None  # data reused from partial files after an interruption
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def total_bytes(self) -> int:
        return sum(f.bytes for f in self.files)

    def to_json(self) -> dict[str, Any]:
        return {
            "machine": self.machine,
            "kind": self.kind,
            "remote": self.remote,
            "snapshot": self.snapshot,
            "files": [f.__dict__ for f in self.files],
            "total_bytes": self.total_bytes,
            "verified": True,
            "crlf_scripts": list(self.crlf_scripts),
            "attempts": self.attempts,
            "sent_bytes": self.sent_bytes,
            "matched_bytes": self.matched_bytes,
            "notes": list(self.notes),
        }


def push(
    store: Store,
    name: str,
    paths: Sequence[str | os.PathLike[str]] = (),
    *,
    to: str | None = None,
    project: Path | None = None,
    progress: ProgressFn | None = None,
    notice: NoticeFn | None = None,
) -> PushReport:
    from rgt.machines import backend_for

    backend = backend_for(store, name)
    if not paths:
        if to:
            raise UsageError(
                "--to is for data pushes; code always goes to code/<hash>/",
                fix="name the data paths to push, or drop --to",
            )
        return _push_code(backend, take_snapshot(project or Path.cwd()), progress, notice)
    remote = _remote_dir(backend.root.durable_root, to)
    return _push_data(backend, [Source.of(p) for p in paths], remote, progress, notice)


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


def _remote_dir(durable_root: str, to: str | None) -> str:
    if to is None:
        return posixpath.join(durable_root, "data")
    return to if to.startswith("/") else posixpath.join(durable_root, to)


def _push_code(
    backend: Any, snapshot: Snapshot, progress: ProgressFn | None, notice: NoticeFn | None
) -> PushReport:
    crlf = crlf_scripts([(snapshot.root / f.rel, f.rel) for f in snapshot.files])
    _warn_crlf(crlf, notice)
    remote = backend.push_snapshot(snapshot, progress=progress)
    local = _local_hashes([(snapshot.root / f.rel, f.rel) for f in snapshot.files])
    crlf += _late_crlf(local, crlf, notice)
    files = tuple(PushedFile(rel, found.size, found.sha256) for rel, found in local.items())
    return PushReport(
        machine=backend.machine.name,
        kind="code",
        remote=remote,
        files=files,
        crlf_scripts=tuple(crlf),
        snapshot=snapshot.digest,
    )


def _push_data(
    backend: Any,
    sources: list[Source],
    remote: str,
    progress: ProgressFn | None,
    notice: NoticeFn | None,
) -> PushReport:
    for source in sources:
        if not source.path.exists() and not source.path.is_symlink():
            raise UsageError(f"{source.path} does not exist", fix="check the path to push")
    listing = local_files(sources)
    crlf = crlf_scripts(listing)
    _warn_crlf(crlf, notice)
    backend.transport.mkdir(remote)
    with ThreadPoolExecutor(max_workers=1) as pool:  # hash here while the bytes travel
        local_future = pool.submit(_local_hashes, listing)
        attempts, sent, matched, arrived = _transfer(backend, sources, remote, listing, progress)
        local = local_future.result()
    files = _compare(backend.machine.name, remote, local, arrived)
    crlf += _late_crlf(local, crlf, notice)
    return PushReport(
        machine=backend.machine.name,
        kind="data",
        remote=remote,
        files=files,
        crlf_scripts=tuple(crlf),
        attempts=attempts,
        sent_bytes=sent,
        matched_bytes=matched,
    )


def _transfer(
    backend: Any,
    sources: list[Source],
    remote: str,
    listing: list[tuple[Path, str]],
    progress: ProgressFn | None,
) -> tuple[int, int | None, int | None, dict[str, str | None]]:
    """Send the files; with them, the machine's sha256 of every file that arrived."""
    from rgt.transport.ssh import SshTransport

    transport = backend.transport
    if not isinstance(transport, SshTransport):
        for source in sources:  # local machine: a plain copy, same manifest check after
            target = posixpath.join(remote, source.prefix) if source.prefix else remote
            transport.put(source.path, target, progress=progress)
        rels = [rel for _, rel in listing]
        return 1, None, None, remote_sha256(transport, backend.python, remote, rels)
    from rgt.transport.rsync import Rsync

    with HashAsItLands(transport, backend.python, remote, listing) as hashes:
        report = Rsync(transport).transfer(
            [f"{s.path}/" if not s.prefix else str(s.path) for s in sources],
            transport.remote_spec(remote.rstrip("/") + "/"),
            progress=progress,
        )
        arrived = hashes.result()
    return len(report.attempts), report.sent_bytes, report.matched_bytes, arrived


def push_snapshot_files(
    transport: Any, snapshot: Snapshot, remote: str, progress: ProgressFn | None = None
) -> None:
    """rsync exactly the snapshot's files into ``remote`` (read-only there), then prove the
    remote tree hashes to the snapshot's digest."""
    import tempfile

    from rgt.transport.rsync import Rsync

    with tempfile.NamedTemporaryFile("wb", prefix="rgt-files-") as listing:
        listing.write(b"\0".join(f.rel.encode("utf-8", "surrogateescape") for f in snapshot.files))
        listing.flush()
        extra = ["--from0", f"--files-from={listing.name}", "--chmod=Fa-w"]
        Rsync(transport, extra=extra).transfer(
            [f"{snapshot.root}/"], transport.remote_spec(remote + "/"), progress=progress
        )
    python = transport.target.python
    remote_hashes = remote_sha256(transport, python, remote, [f.rel for f in snapshot.files])
    if snapshot_digest(snapshot, remote_hashes) != snapshot.digest:
        raise VerifyError(
            f"the code that arrived in {remote} does not hash to snapshot {snapshot.digest}",
            path=remote,
            fix="a file changed while it was pushed; push again",
        )


def snapshot_digest(snapshot: Snapshot, hashes: dict[str, str | None]) -> str:
    """The snapshot digest (see ``rgt.jobs.snapshot``) recomputed from the given file hashes."""
    outer = hashlib.sha256()
    for item in snapshot.files:
        outer.update(
            f"{item.rel}\0{int(item.executable)}\0{hashes.get(item.rel)}\n".encode(
                "utf-8", "surrogateescape"
            )
        )
    return outer.hexdigest()[:20]


@dataclass(frozen=True)
class LocalFile:
    sha256: str
    size: int
    crlf_script: bool  # starts with ``#!`` and has CRLF line endings


def _local_hashes(listing: Sequence[tuple[Path, str]]) -> dict[str, LocalFile]:
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


def _compare(
    machine: str,
    remote: str,
    local: dict[str, LocalFile],
    arrived: dict[str, str | None],
) -> tuple[PushedFile, ...]:
    bad = [rel for rel, found in local.items() if arrived.get(rel) != found.sha256]
    if bad:
        raise VerifyError(
            f"{len(bad)} pushed file(s) differ on {machine}: {bad[:5]}",
            path=posixpath.join(remote, bad[0]),
            fix="a file changed during the push or the disk is full there; "
            "run the same push again (it resumes)",
        )
    return tuple(PushedFile(rel, found.size, found.sha256) for rel, found in local.items())


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


def _late_crlf(local: dict[str, LocalFile], known: list[str], notice: NoticeFn | None) -> list[str]:
    late = [rel for rel, found in local.items() if found.crlf_script and rel not in known]
    _warn_crlf(late, notice)
    return late


def _warn_crlf(crlf: list[str], notice: NoticeFn | None) -> None:
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
