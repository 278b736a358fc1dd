"""Getting one artifact from the machine into the pull's staging directory, trusting nothing.

Three ways, one contract: the file lands in ``.rgt-incoming/<sha256>`` as a regular file or
not at all, and :class:`Refused` says why not.

- over SSH: rsync in its untrusted-receive mode (``rgt.transport.rsync.fetch_file``);
- this machine (the local backend): read with ``O_NOFOLLOW`` at every component below the job
  directory and ``O_NONBLOCK`` (a FIFO or device in the job dir never blocks the pull), at most
  the manifest's byte count;
- a backend with its own ``fetch`` (the in-memory fake, future API backends): its copy, then the
  same check of what landed.
"""

from __future__ import annotations

import errno
import os
import stat
from typing import Any

from rgt.backends.base import Backend
from rgt.errors import BackendError, RgtError, TransportError
from rgt.jobs._pull_dest import DIR_FLAGS, STAGING, Destination, Refused, what_is
from rgt.transport.local import LocalTransport
from rgt.transport.ssh import SshTransport

CHUNK = 1 << 20


def fetch(backend: Backend, job_id: str, entry: dict[str, Any], dest: Destination) -> None:
    """Stage ``entry`` (a checked manifest entry) and rename it into place."""
    rel, name = entry["path"], entry["sha256"]
    try:
        dest.clear_staged(name)
        _receive(backend, job_id, entry, dest)
        if dest.staged_regular(name) is None:
            dest.clear_staged(name)
            raise Refused(f"{rel}: the machine did not send it as a regular file; not copied")
        dest.place(name, rel)
    except (BackendError, TransportError) as exc:
        if "No space left on device" in exc.stderr_tail:
            raise dest.error(OSError(errno.ENOSPC, "No space left on device", rel)) from exc
        if "Disk quota exceeded" in exc.stderr_tail:
            raise dest.error(OSError(errno.EDQUOT, "Disk quota exceeded", rel)) from exc
        raise
    except RgtError:
        raise
    except OSError as exc:
        dest.drop_staged(name)  # a cut copy never stays looking like the file
        raise dest.error(exc) from exc


def _receive(backend: Backend, job_id: str, entry: dict[str, Any], dest: Destination) -> None:
    rel, name, size = entry["path"], entry["sha256"], int(entry["bytes"])
    staged = dest.real / STAGING / name
    if type(backend).fetch is not Backend.fetch:
        backend.fetch(job_id, rel, staged)
    elif isinstance(backend.transport, SshTransport):
        remote = f"{backend.job_paths(job_id).root}/{rel}"
        _fetch_ssh(backend.transport, remote, str(staged), rel, size)
    elif isinstance(backend.transport, LocalTransport):
        _copy_local(backend.job_paths(job_id).root, rel, dest, name, size)
    else:
        backend.fetch(job_id, rel, staged)


def _fetch_ssh(transport: SshTransport, remote: str, staged: str, rel: str, size: int) -> None:
    from rgt.transport.rsync import fetch_file

    if fetch_file(transport, remote, staged, max_bytes=size) is not None and os.path.lexists(
        staged
    ):
        return
    kind = transport.run(["stat", "-c", "%F", "--", remote])
    what = kind.text().strip() if kind.ok else "missing"
    if what == "regular file":
        what = f"larger than the {size} bytes its manifest entry declares"
    elif what != "missing":
        what = f"a {what}"
    raise Refused(f"{rel} on the machine is {what}; not copied")


def _copy_local(job_root: str, rel: str, dest: Destination, name: str, size: int) -> None:
    source = _open_source(job_root, rel)
    with os.fdopen(source, "rb") as reader:
        if not stat.S_ISREG(os.fstat(reader.fileno()).st_mode):
            raise Refused(f"{rel} on the machine is not a regular file; not copied")
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW
        with os.fdopen(os.open(name, flags, 0o644, dir_fd=dest.stage_fd), "wb") as writer:
            copied = 0
            while block := reader.read(CHUNK):
                copied += len(block)
                if copied > size:
                    raise Refused(
                        f"{rel} on the machine is larger than the {size} bytes its manifest "
                        "entry declares; not copied"
                    )
                writer.write(block)


def _open_source(job_root: str, rel: str) -> int:
    """An fd of ``job_root/rel`` reached without following any link below the job dir."""
    fd = os.open(job_root, os.O_RDONLY | os.O_DIRECTORY)
    *dirs, leaf = rel.split("/")
    walked = ""
    try:
        for part in dirs:
            walked = f"{walked}/{part}" if walked else part
            try:
                child = os.open(part, DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                what = what_is(fd, part, exc)
                raise Refused(f"{walked} on the machine is {what}; not followed") from exc
            os.close(fd)
            fd = child
        try:
            return os.open(leaf, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=fd)
        except OSError as exc:
            what = what_is(fd, leaf, exc)
            raise Refused(f"{rel} on the machine is {what}; not followed") from exc
    finally:
        os.close(fd)
