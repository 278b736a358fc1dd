"""This machine as a backend: no meter, the agent detached with ``setsid``."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from rgt.backends.base import Backend, staging_path
from rgt.errors import BackendError
from rgt.models import Machine
from rgt.transport.base import ProgressFn
from rgt.transport.local import LocalTransport
from rgt.transport.snapshot import Snapshot, materialize, retire_damaged_argv


class LocalBackend(Backend):
    kind = "local"

    def __init__(self, machine: Machine) -> None:
        super().__init__(machine, LocalTransport())
        if not machine.connection.get("python"):
            # The agent is stdlib-only: the interpreter running rgt can run it too.
            self.python = sys.executable

    def detach(self, argv: Sequence[str], *, stdin: bytes | None = None) -> None:
        # `setsid -f` forks: the agent gets a new session (no controlling terminal, immune to
        # the CLI's death and its SIGHUP) and is re-parented to init, so nobody must reap it.
        proc = subprocess.Popen(
            ["setsid", "-f", *argv],
            stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            close_fds=True,
        )
        if stdin:
            assert proc.stdin is not None
            proc.stdin.write(stdin)
            proc.stdin.close()
        if proc.wait(timeout=30) != 0:
            raise BackendError(
                "could not start the agent with setsid",
                backend=self.kind,
                returncode=proc.returncode,
            )

    def stop_meter(self) -> str:
        return "this machine bills nothing; it is only marked released (no file was deleted)"

    def push_snapshot(self, snapshot: Snapshot, progress: ProgressFn | None = None) -> str:
        remote = Path(self.root.snapshot(snapshot.digest))
        self.transport.check(retire_damaged_argv(str(remote)))
        if not remote.exists():
            remote.parent.mkdir(parents=True, exist_ok=True)
            partial = Path(staging_path(str(remote)))
            try:
                materialize(snapshot, partial)
                self.publish_snapshot(str(partial), str(remote))
            finally:
                self.discard_staging(str(partial))
        if progress:
            progress(snapshot.total_bytes, snapshot.total_bytes)
        return str(remote)
