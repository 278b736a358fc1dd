"""The transport for this machine: subprocess and file copies, no network."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from rgt._fs import atomic_write_bytes
from rgt._log import CommandLog
from rgt.errors import TransportError
from rgt.transport.base import CommandResult, ProgressFn, Transport

log = logging.getLogger("rgt.transport.local")


class LocalTransport(Transport):
    host = "localhost"

    def run(
        self,
        argv: Sequence[str],
        *,
        input: bytes | None = None,
        timeout: float | None = 60.0,
        cwd: str | None = None,
    ) -> CommandResult:
        try:
            with CommandLog(log, argv[0], argv) as logged:
                proc = subprocess.run(
                    list(argv),
                    input=input,
                    capture_output=True,
                    timeout=timeout,
                    cwd=cwd,
                    check=False,
                )
                logged.returncode = proc.returncode
        except FileNotFoundError as exc:
            return CommandResult(tuple(argv), 127, b"", str(exc).encode())
        except subprocess.TimeoutExpired as exc:
            raise TransportError(
                f"`{argv[0]}` timed out after {timeout}s",
                host=self.host,
                fix="raise the timeout or check the machine's load",
            ) from exc
        return CommandResult(tuple(argv), proc.returncode, proc.stdout, proc.stderr)

    def read_bytes(self, remote: str) -> bytes | None:
        try:
            return Path(remote).read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            return None

    def write_bytes(self, remote: str, data: bytes) -> None:
        atomic_write_bytes(remote, data)

    def mkdir(self, remote: str) -> None:
        os.makedirs(remote, exist_ok=True)

    def exists(self, remote: str) -> bool:
        return os.path.lexists(remote)

    def put(self, local: Path, remote: str, *, progress: ProgressFn | None = None) -> None:
        _copy(local, Path(remote), progress)

    def get(self, remote: str, local: Path, *, progress: ProgressFn | None = None) -> None:
        _copy(Path(remote), local, progress)


def _copy(src: Path, dst: Path, progress: ProgressFn | None) -> None:
    if not src.exists():
        raise FileNotFoundError(src)
    files = [src] if src.is_file() else sorted(p for p in src.rglob("*") if p.is_file())
    total = sum(p.stat().st_size for p in files)
    done = 0
    for path in files:
        target = dst if src.is_file() else dst / path.relative_to(src)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
        done += path.stat().st_size
        if progress:
            progress(done, total)
