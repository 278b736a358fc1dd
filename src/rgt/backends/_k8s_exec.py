"""Commands and files on a Kubernetes machine through the API's pod exec, as ``kubectl exec``
and ``kubectl cp`` do it, with the official client (``kubernetes.stream``).

The machine's shell is a small pod rgt keeps running next to the jobs (``rgt-files-<name>``)
with the claim mounted where the jobs mount it, so the agent's files are read and written
exactly as on an SSH machine. ``argv`` is the exec's command: the API runs it without a shell,
so nothing is ever joined into a command line. Stdin is sent on channel 0 and then closed with
the v5 channel protocol's CLOSE signal (``v5.channel.k8s.io``, Kubernetes >= 1.30); the exit
status comes from the error channel's ``Status``. Files travel as a tar stream over exec, like
``kubectl cp`` (the pod's image needs ``tar``).
"""

from __future__ import annotations

import contextlib
import io
import os
import tarfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rgt._confine import open_parent, safe_name
from rgt.errors import TransportError, UnsafeNameError
from rgt.transport.base import CommandResult, ProgressFn, Transport, whole_file_argv

CHUNK = 256 * 1024  # bytes per stdin frame
STDOUT, STDERR = 1, 2

# Runs in the pod: replace ``$1`` with the tar stream on stdin (a directory); a file goes
# through ``whole_file_argv`` (whole or not at all, like every file rgt writes on a machine).
_PUT_DIR = 'rm -rf -- "$1" && mkdir -p -- "$1" && tar -xf - -C "$1"'
_GET = 'if [ -d "$1" ]; then tar -cf - -C "$1" .; else exit 5; fi'


class ExecTransport(Transport):
    """``run``/``put``/``get`` in one container of one pod, over the API's exec endpoint."""

    def __init__(self, api: Callable[[], Any], namespace: str, pod: str, container: str) -> None:
        self.api = api  # the configured ApiClient, made on first use (the import is lazy)
        self.namespace = namespace
        self.pod = pod
        self.container = container
        self.host = f"pod/{pod}"

    def run(
        self,
        argv: Sequence[str],
        *,
        input: bytes | None = None,
        timeout: float | None = 60.0,
        cwd: str | None = None,
    ) -> CommandResult:
        command = list(argv)
        if cwd:
            command = ["sh", "-c", 'cd -- "$1" && shift && exec "$@"', "sh", cwd, *command]
        socket = self._open(command, stdin=input is not None)
        try:
            if input is not None:
                for start in range(0, len(input), CHUNK):
                    socket.write_stdin(input[start : start + CHUNK])
                socket.close_channel(0)
            return self._finish(socket, tuple(argv), timeout)
        finally:
            socket.close()

    def _open(self, command: list[str], *, stdin: bool) -> Any:
        api = self.api()  # first: a missing client raises the error that names the extra
        from kubernetes import client
        from kubernetes.stream import stream

        core = client.CoreV1Api(api)
        try:
            return stream(
                core.connect_get_namespaced_pod_exec,
                self.pod,
                self.namespace,
                command=command,
                container=self.container,
                stdin=stdin,
                stdout=True,
                stderr=True,
                tty=False,
                _preload_content=False,
                binary=True,
            )
        except Exception as exc:  # the client wraps every socket/HTTP failure in ApiException
            raise TransportError(
                f"exec into {self.host} failed: {exc}",
                host=self.host,
                fix=f"check the pod: `kubectl -n {self.namespace} get pod {self.pod}` "
                "(`rgt up kubernetes` starts it again)",
            ) from exc

    def _finish(self, socket: Any, argv: tuple[str, ...], timeout: float | None) -> CommandResult:
        deadline = None if timeout is None else time.monotonic() + timeout
        while socket.is_open():
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise TransportError(
                    f"`{argv[0]}` timed out after {timeout}s in {self.host}",
                    host=self.host,
                    fix="raise the timeout or check the pod's load",
                )
            socket.update(timeout=1.0 if left is None else min(left, 1.0))
        out = socket.read_channel(STDOUT)
        err = socket.read_channel(STDERR)
        return CommandResult(argv, int(socket.returncode), bytes(out), bytes(err))

    def put(self, local: Path, remote: str, *, progress: ProgressFn | None = None) -> None:
        if local.is_dir():
            data = _tar_of(local)
            self.check(["sh", "-c", _PUT_DIR, "sh", remote], input=data, timeout=None)
        else:
            data = local.read_bytes()
            argv = whole_file_argv(remote, len(data), make_parent=True)
            self.check(argv, input=data, timeout=None)
        if progress:
            progress(len(data), len(data))

    def get(self, remote: str, local: Path, *, progress: ProgressFn | None = None) -> None:
        result = self.run(["sh", "-c", _GET, "sh", remote], timeout=None)
        local.parent.mkdir(parents=True, exist_ok=True)
        if result.ok:
            with tarfile.open(fileobj=io.BytesIO(result.stdout)) as tar:
                tar.extractall(local, filter=confined_member)
            size = len(result.stdout)
        else:
            data = self.check(["cat", "--", remote], timeout=None).stdout
            local.write_bytes(data)
            size = len(data)
        if progress:
            progress(size, size)


def confined_member(member: tarfile.TarInfo, dest: str) -> tarfile.TarInfo | None:
    """A pod's tar is the pod's answer: each member's name passes rgt._confine's check (no
    absolute name, '..', NUL, backslash or drive: UnsafeNameError), then tar's own "data"
    filter (no link out of ``dest``, no device, no setuid bit)."""
    name = (member.name[2:] if member.name.startswith("./") else member.name).rstrip("/")
    if name not in ("", "."):
        safe_name(name, what="the pod's archive member", dest=dest)
        with contextlib.suppress(FileNotFoundError):  # no link on its way under dest
            os.close(open_parent(dest, name, create=False)[0])
    try:
        return tarfile.data_filter(member, dest)
    except tarfile.FilterError as exc:
        raise UnsafeNameError(
            f"the pod's archive member {member.name!r} is refused: {exc}",
            name=member.name,
            reason=str(exc),
            fix="the pod's files are not what rgt copies; nothing was written outside " + dest,
        ) from exc


def _tar_of(directory: Path) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for path in sorted(directory.rglob("*")):
            tar.add(path, arcname=path.relative_to(directory).as_posix(), recursive=False)
    return buffer.getvalue()
