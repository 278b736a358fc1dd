"""The transport primitives every machine connection implements.

A transport runs one argv on the machine and copies files. Everything else (reading status.json,
starting the agent, pulling artifacts) is derived from these in ``rgt.backends.base``.
Arguments are always a list: a transport that goes through a shell (ssh) quotes every element
with ``shlex.quote``; none ever joins user strings into a command line unquoted.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from rgt.errors import BackendError

# Called as progress(bytes_done, bytes_total or None).
ProgressFn = Callable[[int, int | None], None]


@dataclass(frozen=True)
class CommandResult:
    argv: tuple[str, ...]
    returncode: int
    stdout: bytes
    stderr: bytes

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def text(self) -> str:
        return self.stdout.decode("utf-8", "replace")

    def stderr_tail(self, lines: int = 20) -> str:
        return "\n".join(self.stderr.decode("utf-8", "replace").splitlines()[-lines:])


class Transport(abc.ABC):
    """Primitives: ``run``, ``put``, ``get``. Raise ``TransportError`` when the connection
    (not the command) fails."""

    host: str = "localhost"

    @abc.abstractmethod
    def run(
        self,
        argv: Sequence[str],
        *,
        input: bytes | None = None,
        timeout: float | None = 60.0,
        cwd: str | None = None,
    ) -> CommandResult:
        """Run ``argv`` on the machine; return its result whatever its exit code."""

    @abc.abstractmethod
    def put(self, local: Path, remote: str, *, progress: ProgressFn | None = None) -> None:
        """Copy a local file or directory tree to ``remote`` (created or replaced)."""

    @abc.abstractmethod
    def get(self, remote: str, local: Path, *, progress: ProgressFn | None = None) -> None:
        """Copy a remote file or directory tree to ``local``; resumes a partial copy."""

    # -- derived helpers -----------------------------------------------------------------

    def check(
        self,
        argv: Sequence[str],
        *,
        input: bytes | None = None,
        timeout: float | None = 60.0,
        cwd: str | None = None,
    ) -> CommandResult:
        result = self.run(argv, input=input, timeout=timeout, cwd=cwd)
        if not result.ok:
            raise BackendError(
                f"`{' '.join(argv[:3])}…` failed on {self.host} (exit {result.returncode})",
                backend=type(self).__name__,
                returncode=result.returncode,
                stderr_tail=result.stderr_tail(),
            )
        return result

    def read_bytes(self, remote: str) -> bytes | None:
        """The file's content, or None when it does not exist."""
        result = self.run(["cat", "--", remote])
        return result.stdout if result.ok else None

    def write_bytes(self, remote: str, data: bytes) -> None:
        """Write atomically on the machine (temp file + rename in the same directory)."""
        tmp = f"{remote}.rgt-tmp"
        self.check(["sh", "-c", 'cat > "$1" && mv -f "$1" "$2"', "sh", tmp, remote], input=data)

    def mkdir(self, remote: str) -> None:
        self.check(["mkdir", "-p", "--", remote])

    def exists(self, remote: str) -> bool:
        return self.run(["test", "-e", remote]).ok
