"""The machine's sha256 of every pushed file: the manifest of what arrived.

The hashing runs on the machine with its python3 (``_machine_sha256.py``, stdlib only). Two
ways to drive it:

- ``remote_sha256``: after the fact, one round trip (code snapshots, machines without ssh);
- ``HashAsItLands``: started before rsync, it hashes each file as soon as rsync has renamed it
  into place, so by the end of the transfer only the last files are left. rsync's pipeline
  (sender, ssh cipher, receiver) leaves cores idle even on a busy box; the hashing fills them
  instead of adding a second pass after the transfer. Whatever happened during the push,
  the result is the bytes as they are after it: the script re-stats every early hash at the
  end and hashes again a file that changed.
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from types import TracebackType
from typing import Any

from rgt.errors import BackendError, TransportError
from rgt.transport.base import Transport

TIMEOUT_S = 3600
ABANDON_S = 10  # after a failed transfer, how long to wait for the machine to stop hashing
UNKNOWN = (-1, -1)  # expected (size, mtime) not known: hash after the transfer only
FINISHED = b"\0"  # written once the transfer is over; EOF without it aborts the hashing


def machine_script() -> str:
    return resources.files("rgt.transport").joinpath("_machine_sha256.py").read_text("utf-8")


def hash_input(rels: Sequence[str], expected: Sequence[tuple[int, int]]) -> bytes:
    """The script's stdin up to (not including) ``FINISHED``: see ``_machine_sha256``."""
    fields = b"".join(
        b"%s\0%d\0%d\0" % (rel.encode("utf-8", "surrogateescape"), size, mtime)
        for rel, (size, mtime) in zip(rels, expected, strict=True)
    )
    return b"%d\n%s" % (len(fields), fields)


def remote_sha256(
    transport: Transport, python: str, base: str, rels: Sequence[str]
) -> dict[str, str | None]:
    """sha256 of each ``base/rel`` on the machine, one round trip; None when unreadable."""
    if not rels:
        return {}
    stdin = hash_input(rels, [UNKNOWN] * len(rels)) + FINISHED
    result = transport.run([python, "-c", machine_script(), base], input=stdin, timeout=TIMEOUT_S)
    hashes = _parse(result.stdout, rels) if result.ok else None
    if hashes is None:
        raise BackendError(
            f"could not hash the pushed files in {base}",
            backend="ssh",
            returncode=result.returncode,
            stderr_tail=result.stderr_tail(),
            fix="check that the machine's python3 works (`rgt audit`)",
        )
    return hashes


def _parse(stdout: bytes, rels: Sequence[str]) -> dict[str, str | None] | None:
    lines = stdout.decode("utf-8", "replace").split()
    if len(lines) != len(rels):
        return None
    return {rel: (None if h == "-" else h) for rel, h in zip(rels, lines, strict=True)}


class HashAsItLands:
    """``with HashAsItLands(...) as hashes: transfer(); arrived = hashes.result()``.

    Over ssh only (one more session on the transfer's multiplexed connection). If that
    session breaks (a connection drop the transfer survived by retrying), ``result`` hashes
    after the fact instead."""

    def __init__(
        self, transport: Any, python: str, base: str, listing: Sequence[tuple[Path, str]]
    ) -> None:
        self.transport = transport
        self.python = python
        self.base = base
        self.rels = [rel for _, rel in listing]
        self.expected = [_size_and_mtime(path) for path, _ in listing]
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> HashAsItLands:
        from rgt.transport.ssh import remote_command, ssh_argv

        target = self.transport.target
        command = remote_command([self.python, "-c", machine_script(), self.base])
        self.proc = subprocess.Popen(
            [*ssh_argv(target), target.destination, "--", command],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(hash_input(self.rels, self.expected))
            self.proc.stdin.flush()
        except OSError:
            pass  # the session did not start: ``result`` hashes after the transfer
        return self

    def result(self) -> dict[str, str | None]:
        """Tell the machine the transfer is over; its sha256 of every file (None: unreadable)."""
        assert self.proc is not None
        try:
            stdout, _ = self.proc.communicate(FINISHED, timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired as exc:
            raise TransportError(
                f"hashing the pushed files in {self.base} took over {TIMEOUT_S}s",
                host=self.transport.host,
                fix="check the machine (console) and its disk; push again to re-check",
            ) from exc
        hashes = _parse(stdout, self.rels) if self.proc.returncode == 0 else None
        if hashes is None:
            return remote_sha256(self.transport, self.python, self.base, self.rels)
        return hashes

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        # Our end of stdin closes: the script sees EOF without FINISHED and exits. The ssh
        # master holds the session's pipes until then, so the wait is bounded.
        self.proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.communicate(timeout=ABANDON_S)


def _size_and_mtime(path: Path) -> tuple[int, int]:
    try:
        found = path.stat()
    except OSError:
        return UNKNOWN
    return found.st_size, int(found.st_mtime)
