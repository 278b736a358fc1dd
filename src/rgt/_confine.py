"""Names chosen by someone else, placed under a destination rgt was told to fill.

A hub's file list, a machine's manifest, a vendor's output listing and an archive's members all
name paths, and each is a claim from a computer rgt does not control: a hub or a mirror (AutoDL
points jobs at a third-party one by default) that answers ``../../.ssh/authorized_keys`` or
``/root/.bashrc`` must not get a file written there. Every writer of such a name goes through
this module:

- :func:`safe_name` refuses, before anything is touched: a name that is not text, empty, absolute
  (``/x``), with a drive or UNC prefix (``C:x``, ``\\\\host``), a backslash (a separator on
  Windows, where the files may be read later), an empty, ``.`` or ``..`` component, or a NUL
  or other control character;
- :func:`open_parent` walks from the destination to the name's directory one component at a
  time through directory descriptors opened with ``O_NOFOLLOW``: a component that is a symbolic
  link (planted before, or swapped in while rgt writes) is refused, never followed, and what
  is written next is written relative to the descriptor, so a later swap cannot redirect it;
- :class:`Within` does the file operations a writer needs (open, size, rename, remove) relative
  to that descriptor, opening leaves with ``O_NOFOLLOW``.

The destination itself may be reached through links: the user chose it. Stdlib only and
Python 3.8, because the fetch downloader ships this file next to itself to the machine.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
from typing import IO, Any

try:
    from rgt.errors import UnsafeNameError
except ImportError:  # shipped alone next to the fetch downloader, where rgt is not installed

    class UnsafeNameError(ValueError):  # type: ignore[no-redef]
        """The stand-in of rgt.errors.UnsafeNameError on the machine (same fields)."""

        def __init__(self, message: str, *, name: str, reason: str, fix: str) -> None:
            super().__init__(message)
            self.message, self.name, self.reason, self.fix = message, name, reason, fix


DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
_DRIVE = re.compile(r"\A[A-Za-z]:")  # C:\x, C:x (drive-relative) on Windows
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
FIX = "the source that named it is broken or hostile; nothing was written for it outside {dest}"

__all__ = ["UnsafeNameError", "Within", "confined", "open_parent", "safe_name", "within"]


def why_unsafe(name: object) -> str | None:
    """Why ``name`` cannot be a path under a destination, or None when it can."""
    if not isinstance(name, str):
        return f"not a text name ({type(name).__name__})"
    if not name:
        return "empty"
    if "\x00" in name:
        return "a NUL byte"
    if _CONTROL.search(name):
        return "a control character"
    if "\\" in name:
        return "a backslash (a path separator on Windows)"
    if name.startswith("/"):
        return "an absolute path"
    if _DRIVE.match(name):
        return "a drive prefix"
    parts = name.split("/")
    if ".." in parts:
        return "a '..' component (it climbs out of the destination)"
    if "" in parts or "." in parts:
        return "an empty or '.' component"
    return None


def safe_name(
    name: object, *, what: str = "a name from outside", dest: str = "the destination", fix: str = ""
) -> str:
    """``name`` itself when it is a relative path of plain components, else UnsafeNameError."""
    reason = why_unsafe(name)
    if reason is None:
        return str(name)
    shown = repr(name)[:200]
    raise UnsafeNameError(
        f"{what} {shown} is refused: {reason}",
        name=shown,
        reason=reason,
        fix=fix or FIX.format(dest=dest),
    )


def open_parent(root: str, rel: str, *, create: bool = True) -> tuple[int, str]:
    """A descriptor of ``rel``'s directory under ``root`` (created as needed, mode 0755) and the
    leaf name. A component that is a link or not a directory is an UnsafeNameError; with
    ``create=False`` a missing one is FileNotFoundError. The caller closes the descriptor."""
    rel = safe_name(rel, dest=root)
    return walk(os.open(root, os.O_RDONLY | os.O_DIRECTORY), rel, create=create, where=root)


def walk(fd: int, rel: str, *, create: bool, where: str) -> tuple[int, str]:
    """:func:`open_parent` from a directory descriptor the walk takes over (closes or returns);
    ``where`` names that directory in a refusal."""
    *dirs, leaf = rel.split("/")
    walked = ""
    for name in dirs:
        walked = f"{walked}/{name}" if walked else name
        try:
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, 0o755, dir_fd=fd)
            child = os.open(name, DIR_FLAGS, dir_fd=fd)
        except OSError as exc:
            what = what_is(fd, name, exc)
            os.close(fd)
            if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                raise  # missing (create=False), a full disk, a permission: what they are
            raise UnsafeNameError(
                f"{rel}: {walked} in {where} is {what}; not followed",
                name=rel,
                reason=f"{walked} is {what}",
                fix=f"remove {walked} in {where} (nothing was written through it) and run again",
            ) from exc
        os.close(fd)
        fd = child
    return fd, leaf


def what_is(dir_fd: int, name: str, exc: OSError) -> str:
    """What ``name`` is, for a refusal (``O_DIRECTORY|O_NOFOLLOW`` on a link says ENOTDIR on
    Linux, ELOOP elsewhere: look instead of guessing from the errno)."""
    try:
        mode = os.lstat(name, dir_fd=dir_fd).st_mode
    except FileNotFoundError:
        return "missing"
    except OSError:
        return exc.strerror or str(exc)
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if not stat.S_ISDIR(mode) and exc.errno == errno.ENOTDIR:
        return "not a directory"
    return exc.strerror or str(exc)


def confined(dest_root: str, remote_name: object) -> str:
    """``dest_root/remote_name`` for a writer that works by path (its directories created, none
    of them a link, and no link at the name itself). Race-aware writers use :func:`within`."""
    rel = safe_name(remote_name, dest=dest_root)
    fd, leaf = open_parent(dest_root, rel)
    try:
        mode = os.lstat(leaf, dir_fd=fd).st_mode
    except FileNotFoundError:
        mode = 0
    finally:
        os.close(fd)
    if stat.S_ISLNK(mode):
        raise UnsafeNameError(
            f"{rel} under {dest_root} is a symbolic link; not written through",
            name=rel,
            reason="a symbolic link",
            fix=f"remove {dest_root}/{rel} and run again",
        )
    return os.path.join(dest_root, rel)


class Within:
    """One directory under a destination, held by a descriptor: every operation names a leaf
    in it and never follows a link at that leaf."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def __enter__(self) -> Within:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def open(self, leaf: str, mode: str = "rb", buffering: int = -1) -> IO[Any]:
        def opener(path: str, flags: int) -> int:
            return os.open(path, flags | os.O_NOFOLLOW, 0o644, dir_fd=self.fd)

        return open(leaf, mode, buffering=buffering, opener=opener)

    def size(self, leaf: str) -> int:
        """The size of a regular file at ``leaf``; 0 when missing or not a regular file."""
        try:
            st = os.lstat(leaf, dir_fd=self.fd)
        except OSError:
            return 0
        return st.st_size if stat.S_ISREG(st.st_mode) else 0

    def is_file(self, leaf: str) -> bool:
        try:
            return stat.S_ISREG(os.lstat(leaf, dir_fd=self.fd).st_mode)
        except OSError:
            return False

    def replace(self, src: str, dst: str) -> None:
        """Rename ``src`` to ``dst`` (a link at ``dst`` is replaced, never followed)."""
        os.replace(src, dst, src_dir_fd=self.fd, dst_dir_fd=self.fd)

    def remove(self, leaf: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(leaf, dir_fd=self.fd)


def within(dest_root: str, remote_name: object, *, create: bool = True) -> tuple[Within, str]:
    """The directory of ``remote_name`` under ``dest_root``, held open, and the leaf name."""
    fd, leaf = open_parent(dest_root, safe_name(remote_name, dest=dest_root), create=create)
    return Within(fd), leaf
