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

# Runs on the machine: stdin to a temp file, renamed over $2 only when all $3 bytes arrived.
# A connection cut mid-transfer (sshd killed, a network drop) leaves the remote shell running
# with its stdin closed: ``cat`` then ends "successfully" with part of the data, and a plain
# ``cat > tmp && mv`` would install the cut file (a truncated agent that breaks every later
# call, a cut spec). The temp file is the writer's own ($1 and the shell's pid): three
# `rgt run` at once upload the same agent, and with one shared temp name one of them renamed
# the file away while another was still counting it.
WHOLE_FILE = r"""
tmp="$1.$$"
cat > "$tmp" || { rm -f -- "$tmp"; exit 1; }
n=$(wc -c < "$tmp")
if [ $n -ne "$3" ]; then
  rm -f -- "$tmp"
  echo "rgt: the transfer to $2 was cut: $n of $3 bytes arrived" >&2
  exit 1
fi
exec mv -f -- "$tmp" "$2"
"""


def whole_file_argv(remote: str, size: int, *, make_parent: bool = False) -> list[str]:
    """The argv that writes stdin (``size`` bytes) to ``remote`` whole or not at all;
    ``make_parent`` creates its directory first."""
    script = WHOLE_FILE
    if make_parent:
        script = 'mkdir -p -- "$(dirname -- "$2")" || exit 1\n' + script
    return ["sh", "-c", script, "sh", f"{remote}.rgt-tmp", remote, str(size)]


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
        """Write atomically on the machine (temp file + rename in the same directory); a
        transfer cut on the way never becomes the file (``WHOLE_FILE``)."""
        self.check(whole_file_argv(remote, len(data)), input=data)

    def mkdir(self, remote: str) -> None:
        self.check(["mkdir", "-p", "--", remote])

    def exists(self, remote: str) -> bool:
        return self.run(["test", "-e", remote]).ok
