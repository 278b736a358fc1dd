"""rsync over the SSH transport's connection: resumable, retried, with progress.

A transfer to a rented machine is interrupted as a matter of course (flaky links, a machine
restarted from the console, a laptop closing). So every transfer runs in a loop:

- ``--partial --partial-dir=.rgt-partial``: an interrupted file is kept beside its destination
  and the next attempt uses it as the delta basis, so what arrived is not sent again;
- ``--timeout``: a stalled link ends the attempt instead of hanging forever;
- retries with exponential backoff, only for exit codes that mean "the connection broke"
  (a full disk or a missing ``rsync`` on the machine is reported at once, never retried),
  for as long as attempts keep moving data; once nothing has moved for ``patience_s`` (the
  machine is gone or frozen, not the link flaky), counting the attempts' own time (a frozen
  machine's attempt lasts until ``ConnectTimeout`` or ``--timeout``) and the waits between
  them, the error;
- ``--stats`` is parsed after each attempt (literal vs matched bytes: what was really sent)
  and ``--info=progress2`` drives a progress callback;
- ``--protect-args`` (``-s``): remote paths travel as data, never through the remote shell,
  so a name like ``$(touch PWNED)`` is just a name.

Receiving from a machine (``fetch_file``) trusts nothing it sends: one regular file, no
archive mode — no symbolic links (``--no-links``), devices or specials are ever created here,
no directory is recursed into, no owner is copied, set-id bits are dropped, and nothing larger
than the manifest declared is accepted (``--max-size``). What it skips, the caller reports.
"""

from __future__ import annotations

import functools
import logging
import os
import pty
import re
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from rgt._log import CommandLog
from rgt.errors import BackendError, TransportError
from rgt.transport.base import ProgressFn
from rgt.transport.ssh import HOST_KEY_MARKERS, SshTransport, ssh_argv

log = logging.getLogger("rgt.transport.rsync")

PARTIAL_DIR = ".rgt-partial"
# rsync exit codes that mean the connection (not the data) failed: socket I/O (10), protocol
# stream (12), IPC (14), data timeout (30), connect timeout (35), ssh failure (255).
RETRYABLE = frozenset({10, 12, 14, 30, 35, 255})
OK_CODES = frozenset({0, 24})  # 24: a source file vanished while being sent (reported)
PARTIAL_TRANSFER = 23  # some file could not be sent (a source vanished, was unreadable)
# One regular file from an untrusted machine: times kept (``-I``: a staged file of the same
# size and time is still compared), and nothing that is not a regular file.
UNTRUSTED_RECEIVE = ("-t", "-I", "--no-links", "--no-devices", "--no-specials")
PROGRESS_RE = re.compile(rb"^\s*([\d,.]+)\s+(\d+)%")
STAT_KEYS = {
    "Literal data": "literal",
    "Matched data": "matched",
    "Total bytes sent": "sent",
    "Total transferred file size": "transferred",
    "Number of regular files transferred": "files",
}


@dataclass
class Attempt:
    returncode: int
    literal_bytes: int  # file data sent (from --stats; estimated from progress if cut off)
    matched_bytes: int = 0  # data the receiver already had (resumed partial files)
    files: int = 0
    stderr_tail: str = ""


@dataclass
class TransferReport:
    attempts: list[Attempt] = field(default_factory=list)

    @property
    def sent_bytes(self) -> int:
        """File data put on the wire over every attempt, including any sent twice."""
        return sum(a.literal_bytes for a in self.attempts)

    @property
    def matched_bytes(self) -> int:
        return sum(a.matched_bytes for a in self.attempts)

    @property
    def vanished(self) -> bool:
        return bool(self.attempts) and self.attempts[-1].returncode == 24


class Rsync:
    """One configured rsync; ``transfer`` runs the retry loop."""

    def __init__(
        self,
        transport: SshTransport,
        *,
        retries: int = 8,
        io_timeout: int = 60,
        backoff_s: float = 1.0,
        max_backoff_s: float = 30.0,
        patience_s: float = 60.0,
        bwlimit_kbps: int | None = None,
        extra: Sequence[str] = (),
        archive: bool = True,
    ) -> None:
        self.transport = transport
        self.retries = retries
        self.io_timeout = io_timeout
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.patience_s = patience_s
        self.bwlimit_kbps = bwlimit_kbps
        self.extra = tuple(extra)
        self.mode = ("-a",) if archive else UNTRUSTED_RECEIVE

    def argv(self, sources: Sequence[str], dest: str) -> list[str]:
        import shlex

        argv = [
            "rsync",
            *self.mode,
            "-s",
            "--partial",
            f"--partial-dir={PARTIAL_DIR}",
            f"--timeout={self.io_timeout}",
            "--stats",
            "--info=progress2",
            "--no-inc-recursive",
            "-e",
            shlex.join(ssh_argv(self.transport.target)),
        ]
        if self.bwlimit_kbps:
            argv.append(f"--bwlimit={self.bwlimit_kbps}")
        return [*argv, *self.extra, "--", *sources, dest]

    def transfer(
        self, sources: Sequence[str], dest: str, *, progress: ProgressFn | None = None
    ) -> TransferReport:
        check_local_rsync()
        report = TransferReport()
        argv = self.argv(sources, dest)
        delay, moved_at = self.backoff_s, time.monotonic()  # when data last moved (or start)
        for attempt_no in range(self.retries + 1):
            attempt = _run_once(argv, progress)
            report.attempts.append(attempt)
            if attempt.returncode in OK_CODES:
                return report
            self._raise_unless_retryable(attempt)
            if attempt.literal_bytes > 0:  # it moved: a flaky link, worth the whole backoff
                delay, moved_at = self.backoff_s, time.monotonic()
            still = time.monotonic() - moved_at
            if attempt_no == self.retries or still + delay > self.patience_s:
                break
            time.sleep(delay)
            delay = min(self.max_backoff_s, delay * 2)
        raise TransportError(
            f"rsync to {self.transport.target.name} failed {len(report.attempts)} times "
            f"(last exit {report.attempts[-1].returncode})",
            host=self.transport.host,
            returncode=report.attempts[-1].returncode,
            stderr_tail=report.attempts[-1].stderr_tail,
            fix="check that the machine is up; run the same command again: it resumes "
            "where it stopped (partial files are kept)",
        )

    def _raise_unless_retryable(self, attempt: Attempt) -> None:
        tail = attempt.stderr_tail
        if any(marker in tail for marker in HOST_KEY_MARKERS):
            raise self.transport.connection_error(tail)
        if "rsync: command not found" in tail or "rsync: not found" in tail:
            raise BackendError(
                f"rsync is not installed on {self.transport.target.name}",
                backend="ssh",
                returncode=attempt.returncode,
                stderr_tail=tail,
                fix="install it on the machine: `apt-get install -y rsync`",
            )
        if attempt.returncode not in RETRYABLE:
            raise BackendError(
                f"rsync with {self.transport.target.name} failed (exit {attempt.returncode}): "
                f"{tail.strip().splitlines()[-1] if tail.strip() else 'no message'}",
                backend="ssh",
                returncode=attempt.returncode,
                stderr_tail=tail,
                fix="read the message above (a full disk, a permission, a bad path); this is "
                "not a connection problem, so rgt did not retry",
            )


def fetch_file(
    transport: SshTransport,
    remote: str,
    local: str,
    *,
    max_bytes: int,
    progress: ProgressFn | None = None,
) -> TransferReport | None:
    """Copy one remote regular file to ``local`` (a path in a private staging directory).
    Returns None when the machine sent nothing (the path is missing, a link, a directory, or
    larger than ``max_bytes``): the caller names why. Resumable like every transfer."""
    # --max-size=0 would mean "no limit" to some rsync versions; an empty file fits in 1.
    rsync = Rsync(transport, archive=False, extra=(f"--max-size={max(max_bytes, 1)}",))
    try:
        return rsync.transfer([transport.remote_spec(remote)], local, progress=progress)
    except BackendError as exc:
        if exc.returncode == PARTIAL_TRANSFER and "No space left" not in exc.stderr_tail:
            return None
        raise


@functools.cache
def check_local_rsync() -> str:
    """rsync >= 3.1 here (``--info=progress2``); macOS ships 2.6.9 or openrsync."""
    try:
        out = subprocess.run(["rsync", "--version"], capture_output=True, timeout=30).stdout
    except FileNotFoundError:
        out = b""
    found = re.search(rb"rsync\s+version\s+v?(\d+)\.(\d+)\S*", out)
    if not found or (int(found.group(1)), int(found.group(2))) < (3, 1):
        raise TransportError(
            f"rgt needs rsync >= 3.1 on this computer (found: "
            f"{found.group(0).decode() if found else 'none'})",
            fix="install it (Debian/Ubuntu: `apt-get install rsync`; macOS: `brew install rsync`)",
        )
    return found.group(0).decode()


def _run_once(argv: list[str], progress: ProgressFn | None) -> Attempt:
    # rsync block-buffers its progress lines into a pipe; a pty makes it write them live.
    master, slave = pty.openpty()
    env = {**os.environ, "LC_ALL": "C"}  # one number format to parse
    try:
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=slave, stderr=subprocess.PIPE, env=env
        )
    except FileNotFoundError as exc:
        os.close(master)
        raise TransportError(
            "rsync is not installed on this computer",
            fix="install rsync >= 3.1 (macOS: `brew install rsync`)",
        ) from exc
    finally:
        os.close(slave)
    errors: list[bytes] = []
    reader = threading.Thread(target=_drain, args=(proc, errors))
    reader.start()
    with CommandLog(log, "rsync", argv) as logged:
        stats, last_progress = _read_stdout(master, progress)
        returncode = logged.returncode = proc.wait()
    reader.join()
    tail = "\n".join(b"".join(errors).decode("utf-8", "replace").splitlines()[-20:])
    literal = stats.get("literal", last_progress if returncode not in OK_CODES else 0)
    return Attempt(
        returncode=returncode,
        literal_bytes=literal,
        matched_bytes=stats.get("matched", 0),
        files=stats.get("files", 0),
        stderr_tail=tail,
    )


def _drain(proc: subprocess.Popen[bytes], into: list[bytes]) -> None:
    assert proc.stderr is not None
    into.append(proc.stderr.read())


def _read_stdout(fd: int, progress: ProgressFn | None) -> tuple[dict[str, int], int]:
    """Parse progress2 lines (ended by ``\\r``) as they come, and the stats block at the end."""
    stats: dict[str, int] = {}
    last = 0
    buffer = b""
    try:
        while chunk := os.read(fd, 65536):
            buffer += chunk
            *lines, buffer = re.split(rb"[\r\n]", buffer)
            for line in lines:
                last = _parse_line(line, stats, progress, last)
    except OSError:
        pass  # EIO: the pty closes when rsync exits
    finally:
        os.close(fd)
    _parse_line(buffer, stats, progress, last)
    return stats, last


def _parse_line(line: bytes, stats: dict[str, int], progress: ProgressFn | None, last: int) -> int:
    match = PROGRESS_RE.match(line)
    if match:
        done = _number(match.group(1))
        percent = int(match.group(2))
        if progress:
            progress(done, done * 100 // percent if percent else None)
        return done
    key, _, value = line.decode("utf-8", "replace").partition(":")
    if key.strip() in STAT_KEYS and value.strip():
        stats[STAT_KEYS[key.strip()]] = _number(value.split()[0].encode())
    return last


def _number(text: bytes) -> int:
    digits = re.sub(rb"[^\d]", b"", text)
    return int(digits) if digits else 0
