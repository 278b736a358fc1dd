"""The local side of a pull: a destination no file from the machine can step out of.

The machine is someone else's computer, and its manifest and its files are claims. So the
destination (``--to``) is resolved once and opened as a directory; every later step works
through directory file descriptors opened with ``O_NOFOLLOW``: a symbolic link met on the way
(planted by an earlier copy, or swapped in while the pull runs) is refused, never followed.
Files arrive in a private staging directory inside the destination (``.rgt-incoming``, named by
their expected sha256, so an interrupted copy resumes), are checked to be regular files there,
and are renamed into place: a rename replaces a link at the target instead of writing through
it. After the copy, every landed path is checked again: its real path inside ``--to``, a
regular file.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from rgt._confine import walk
from rgt._confine import what_is as what_is  # _pull_fetch names refusals with it
from rgt.errors import RgtError, UnsafeNameError, UsageError
from rgt.jobs._pull_space import Need, local_error

STAGING = ".rgt-incoming"
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW


class Refused(Exception):
    """One file was not placed; ``str()`` is the note shown to the user."""


class Destination:
    """``--to``, opened once. Use as a context manager (closes the descriptors)."""

    def __init__(self, root: Path) -> None:
        self.given = root
        try:
            root.mkdir(parents=True, exist_ok=True)
            self.real = Path(os.path.realpath(root))
            self.fd = os.open(self.real, os.O_RDONLY | os.O_DIRECTORY)
        except OSError as exc:
            raise local_error(exc, root) from exc
        self.stage_fd = -1
        self.need = Need()  # what is left to write, named when the disk fills

    def __enter__(self) -> Destination:
        return self

    def __exit__(self, *_exc: object) -> None:
        for fd in (self.stage_fd, self.fd):
            if fd >= 0:
                os.close(fd)

    @contextlib.contextmanager
    def guard(self) -> Iterator[None]:
        """Every local ``OSError`` inside becomes rgt's error (:meth:`error`)."""
        try:
            yield
        except RgtError:
            raise
        except OSError as exc:
            raise self.error(exc) from exc

    def error(self, exc: OSError) -> RgtError:
        """A local failure as rgt's error: the disk full (with the mount and what is still
        needed), or the path and the fix."""
        return local_error(exc, self.real, self.need)

    # -- staging -------------------------------------------------------------------------

    def open_staging(self) -> Path:
        """Lock the destination (one pull into it at a time, until this one has verified and
        closed; a second waits) and create or reuse ``.rgt-incoming``. The lock is on the
        directory itself, so no lock file is ever left among the artifacts."""
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX)  # dropped when the fd closes (or process dies)
            with contextlib.suppress(FileExistsError):
                os.mkdir(STAGING, 0o700, dir_fd=self.fd)
        except OSError as exc:
            raise self.error(exc) from exc
        try:
            self.stage_fd = os.open(STAGING, DIR_FLAGS, dir_fd=self.fd)
        except OSError as exc:
            if exc.errno not in (errno.ENOTDIR, errno.ELOOP):
                raise self.error(exc) from exc
            raise UsageError(
                f"{self.real / STAGING} is not a plain directory ({exc.strerror})",
                fix=f"remove {self.real / STAGING} and pull again",
            ) from exc
        return self.real / STAGING

    def clean_staging(self) -> None:
        """Remove the staging directory once every file is in place (symlink-safe)."""
        with contextlib.suppress(OSError):
            remove_at(self.fd, STAGING)

    def clear_staged(self, name: str) -> None:
        """A staged name that is not a regular file (a link, a directory) is removed first."""
        try:
            mode = os.lstat(name, dir_fd=self.stage_fd).st_mode
        except FileNotFoundError:
            return
        if not stat.S_ISREG(mode):
            remove_at(self.stage_fd, name)

    def drop_staged(self, name: str) -> None:
        """Remove a staged file a failed copy left (it never looks complete: it is only ever
        renamed into place whole); best effort, the next pull truncates it anyway."""
        with contextlib.suppress(OSError):
            if self.stage_fd >= 0:
                os.unlink(name, dir_fd=self.stage_fd)

    def staged_regular(self, name: str) -> os.stat_result | None:
        try:
            st = os.lstat(name, dir_fd=self.stage_fd)
        except FileNotFoundError:
            return None
        return st if stat.S_ISREG(st.st_mode) else None

    # -- placing -------------------------------------------------------------------------

    def parent(self, rel: str, *, create: bool = True) -> tuple[int, str]:
        """An fd of ``rel``'s directory (created as needed) and the leaf name. Refuses a
        component that is a link or not a directory (``rgt._confine.walk``). The caller closes
        the fd."""
        try:
            return walk(os.dup(self.fd), rel, create=create, where="the destination")
        except UnsafeNameError as exc:
            raise Refused(exc.message) from exc
        except FileNotFoundError as exc:  # create=False: nothing there yet
            raise Refused(f"{rel}: a directory on the way is missing") from exc

    def existing_sha256(self, rel: str) -> str | None:
        """The hash of a regular file already at ``rel`` (the resume), else None."""
        try:
            fd, leaf = self.parent(rel, create=False)
        except Refused:
            return None
        try:
            file_fd = os.open(leaf, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=fd)
        except OSError:
            return None
        finally:
            os.close(fd)
        with os.fdopen(file_fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                return None
            return sha256_of(handle)

    def place(self, staged: str, rel: str) -> None:
        """Rename a staged regular file to ``rel``; a link already there is replaced, never
        followed; a directory there is refused."""
        fd, leaf = self.parent(rel)
        try:
            os.rename(staged, leaf, src_dir_fd=self.stage_fd, dst_dir_fd=fd)
        except IsADirectoryError as exc:
            raise Refused(
                f"{rel}: a directory in the destination has its name; not replaced"
            ) from exc
        finally:
            os.close(fd)

    def write_manifest(self, raw: bytes) -> None:
        name = f"manifest.{os.getpid()}"
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644,
                     dir_fd=self.stage_fd)  # fmt: skip
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(raw)
                os.fsync(handle.fileno())
            os.rename(name, "manifest.json", src_dir_fd=self.stage_fd, dst_dir_fd=self.fd)
        except OSError:
            self.drop_staged(name)
            raise

    # -- checks --------------------------------------------------------------------------

    def landed(self, rel: str) -> str | None:
        """Why the file at ``rel`` is not a regular file inside ``--to``, or None if it is."""
        return confined(self.real, rel)


def remove_at(parent_fd: int, name: str) -> None:
    """``rm -rf`` of ``name`` in the directory ``parent_fd``, never following a link."""
    if not stat.S_ISDIR(os.lstat(name, dir_fd=parent_fd).st_mode):
        os.unlink(name, dir_fd=parent_fd)
        return
    fd = os.open(name, DIR_FLAGS, dir_fd=parent_fd)
    try:
        for child in os.listdir(fd):
            remove_at(fd, child)
    finally:
        os.close(fd)
    os.rmdir(name, dir_fd=parent_fd)


def confined(root: Path, rel: str) -> str | None:
    """None when ``root/rel`` is a regular file whose real path is exactly ``root/rel``
    (``root`` itself may be reached through links: the user chose it)."""
    root = Path(os.path.realpath(root))
    path = root / rel
    real = Path(os.path.realpath(path))
    if real != path:
        where = "inside" if real.is_relative_to(root) else "OUTSIDE"
        return f"resolves to {real} ({where} the destination) through a symbolic link"
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return "missing"
    return None if stat.S_ISREG(mode) else "not a regular file"


def sha256_of(handle: BinaryIO) -> str:
    digest = hashlib.sha256()
    while block := handle.read(1 << 20):
        digest.update(block)
    return digest.hexdigest()
