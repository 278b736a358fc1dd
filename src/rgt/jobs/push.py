"""``rgt push NAME [PATHS…] [--to DIR]``: code into an immutable snapshot, data anywhere.

Without paths, the project (the current directory) is pushed as a code snapshot to
``code/<content-hash>/`` — the files ``git`` would track plus untracked ones not ignored, minus
``.rgtignore`` — so a later push never changes what a running job reads. With paths, each one
is pushed (resumably) under ``--to`` (default ``<durable>/data``; a relative ``--to`` is under
the durable root) with rsync's rule: ``data`` lands as ``<to>/data/…``, ``data/`` (a trailing
slash) puts the folder's contents into ``<to>/…``. Either way:

- shell scripts with CRLF line endings are reported *before* the transfer: on the box they fail
  with ``/bin/bash^M: bad interpreter``, usually hours later in a queue;
- a code push names the files the project's ``.gitignore`` kept out of the snapshot (count,
  bytes, the first few) and how to take them back (``!PATTERN`` in ``.rgtignore``);
- after the transfer every file is hashed on the machine and compared with the local sha256;
  the report is the manifest of what arrived, and a mismatch is an error, not a warning.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rgt.errors import UsageError, VerifyError
from rgt.jobs._push_local import (
    LocalFile,
    NoticeFn,
    Source,
    crlf_scripts,
    late_crlf,
    local_files,
    local_hashes,
    warn_crlf,
)
from rgt.state.store import Store
from rgt.transport._ignored import Ignored, gitignored
from rgt.transport.base import ProgressFn
from rgt.transport.remote_hash import HashAsItLands, remote_sha256
from rgt.transport.snapshot import Snapshot, take_snapshot


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
    gitignored: Ignored | None = None  # code pushes: what .gitignore kept out of the snapshot

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
            "gitignored": self.gitignored.to_json() if self.gitignored else None,
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
    from rgt.backends import backend_for

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


def _remote_dir(durable_root: str, to: str | None) -> str:
    if to is None:
        return posixpath.join(durable_root, "data")
    return to if to.startswith("/") else posixpath.join(durable_root, to)


def _push_code(
    backend: Any, snapshot: Snapshot, progress: ProgressFn | None, notice: NoticeFn | None
) -> PushReport:
    crlf = crlf_scripts([(snapshot.root / f.rel, f.rel) for f in snapshot.files])
    warn_crlf(crlf, notice)
    remote = backend.push_snapshot(snapshot, progress=progress)
    local = local_hashes([(snapshot.root / f.rel, f.rel) for f in snapshot.files])
    crlf += late_crlf(local, crlf, notice)
    files = tuple(PushedFile(rel, found.size, found.sha256) for rel, found in local.items())
    return PushReport(
        machine=backend.machine.name,
        kind="code",
        remote=remote,
        files=files,
        crlf_scripts=tuple(crlf),
        snapshot=snapshot.digest,
        gitignored=gitignored(snapshot.root, {f.rel for f in snapshot.files}),
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
    warn_crlf(crlf, notice)
    backend.transport.mkdir(remote)
    with ThreadPoolExecutor(max_workers=1) as pool:  # hash here while the bytes travel
        local_future = pool.submit(local_hashes, listing)
        attempts, sent, matched, arrived = _transfer(backend, sources, remote, listing, progress)
        local = local_future.result()
    files = _compare(backend.machine.name, remote, local, arrived)
    crlf += late_crlf(local, crlf, notice)
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
