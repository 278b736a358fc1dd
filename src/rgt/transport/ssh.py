"""The SSH transport: the system OpenSSH client, one multiplexed connection per machine.

Using ``/usr/bin/ssh`` rather than a Python SSH library means the user's ``~/.ssh/config``,
agent, ProxyJump and hardware keys all work as they do in their terminal. Every call adds:

- ``ControlMaster=auto`` + ``ControlPersist``: the first command opens a master connection and
  later ones reuse it (a status poll costs one round trip, not a handshake). The socket lives
  under ``$RGT_HOME/ssh/%C``; unix socket paths are limited to ~104 bytes, so a long or odd
  ``RGT_HOME`` falls back to a short private directory under ``/tmp``.
- ``BatchMode=yes`` (never hang on a password prompt), ``ConnectTimeout`` and
  ``ServerAliveInterval`` (a dead rental is noticed in about a minute, not at TCP's two hours).
- Trust on first use: the host key is recorded in ``$RGT_HOME/known_hosts/<machine>`` with
  ``StrictHostKeyChecking=accept-new``. Rentals reuse addresses, so a changed key is either a
  new machine behind an old port or an attack; rgt refuses and names ``rgt trust NAME``.

The remote command is ``exec sh -c SCRIPT sh ARGS…`` with every word ``shlex.quote``-d: the login
shell only parses quoted words (no profile is sourced, no word is ever interpreted), and exit
status 255 — ssh's own failure — is a ``TransportError``, never a job failure.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shlex
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rgt._log import CommandLog
from rgt.config import rgt_home
from rgt.errors import HostKeyChangedError, TransportError, UsageError
from rgt.transport.base import CommandResult, ProgressFn, Transport

log = logging.getLogger("rgt.transport.ssh")

SSH_EXIT_FAILURE = 255
CONNECT_TIMEOUT_S = 15
ALIVE_INTERVAL_S = 15
ALIVE_COUNT = 4
CONTROL_PERSIST_S = 300
# ssh binds the master socket at "<dir>/<%C: 40 hex>.<16 random chars>" and renames it: the
# directory gets what is left of the 104-byte limit (macOS; Linux allows 108) after those 58.
MAX_SOCKET_DIR = 104 - 1 - 40 - 17
HOST_KEY_MARKERS = (
    "REMOTE HOST IDENTIFICATION HAS CHANGED",
    "Host key verification failed",
    "HOST KEY HAS CHANGED",
)


@dataclass(frozen=True)
class SshTarget:
    """Where and how to connect; stored as ``Machine.connection`` (see ``to_connection``)."""

    name: str
    host: str
    known_hosts: str
    port: int | None = None
    user: str | None = None
    identity_file: str | None = None
    ssh_options: tuple[str, ...] = field(default_factory=tuple)
    python: str = "python3"

    @classmethod
    def from_connection(cls, name: str, connection: dict[str, Any]) -> SshTarget:
        port = connection.get("port")
        return cls(
            name=name,
            host=str(connection["host"]),
            known_hosts=str(connection["known_hosts"]),
            port=int(port) if port else None,
            user=connection.get("user"),
            identity_file=connection.get("identity_file"),
            ssh_options=tuple(connection.get("ssh_options") or ()),
            python=str(connection.get("python") or "python3"),
        )

    def to_connection(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "port": self.port,
            "user": self.user,
            "identity_file": self.identity_file,
            "ssh_options": list(self.ssh_options),
            "known_hosts": self.known_hosts,
            "python": self.python,
        }

    @property
    def destination(self) -> str:
        """``host`` for ssh; user and port travel as options so rsync can reuse them."""
        return self.host

    @property
    def label(self) -> str:
        user = f"{self.user}@" if self.user else ""
        port = f":{self.port}" if self.port else ""
        return f"{user}{self.host}{port}"


def known_hosts_path(machine: str) -> Path:
    directory = rgt_home() / "known_hosts"
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    return directory / machine


def control_dir() -> Path:
    """A private directory for the control sockets, short enough for a unix socket path."""
    preferred = rgt_home() / "ssh"
    text = str(preferred)
    if len(text) <= MAX_SOCKET_DIR and not any(c.isspace() or c in "\"'%\\" for c in text):
        preferred.mkdir(mode=0o700, exist_ok=True)
        return preferred
    short = short_control_dir(preferred)
    short.mkdir(mode=0o700, exist_ok=True)
    if short.stat().st_uid != os.getuid():
        raise TransportError(f"{short} belongs to another user", fix="set a shorter RGT_HOME")
    return short


def short_control_dir(preferred: Path) -> Path:
    """Where the control sockets go when ``preferred`` is too long for a socket path: a
    folder in the temp dir named after it (empty once every master has exited)."""
    digest = hashlib.sha256(str(preferred).encode("utf-8", "surrogateescape")).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / f"rgt-{os.getuid()}-{digest}"


def option_value(value: str) -> str:
    """Quote a path for ``ssh -o Key=VALUE``: ssh splits the value like a config line and
    expands ``%`` tokens in file options."""
    value = value.replace("%", "%%")
    if any(c.isspace() or c in "\"'\\" for c in value):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return value


def ssh_argv(target: SshTarget, *, master: bool = True) -> list[str]:
    """``ssh`` with every rgt option, up to (not including) the destination."""
    argv = [
        "ssh",
        "-T",
        "-x",
        "-o",
        "BatchMode=yes",
        "-o",
        f"ConnectTimeout={CONNECT_TIMEOUT_S}",
        "-o",
        f"ServerAliveInterval={ALIVE_INTERVAL_S}",
        "-o",
        f"ServerAliveCountMax={ALIVE_COUNT}",
        "-o",
        "StrictHostKeyChecking=accept-new",
        "-o",
        "HashKnownHosts=no",
        "-o",
        "LogLevel=ERROR",
        "-o",
        f"UserKnownHostsFile={option_value(target.known_hosts)}",
    ]
    if master:
        argv += [
            "-o",
            "ControlMaster=auto",
            "-o",
            f"ControlPath={control_dir()}/%C",
            "-o",
            f"ControlPersist={CONTROL_PERSIST_S}",
        ]
    for option in target.ssh_options:
        argv += ["-o", option]
    if target.port:
        argv += ["-p", str(target.port)]
    if target.user:
        argv += ["-l", target.user]
    if target.identity_file:
        argv += ["-i", target.identity_file.replace("%", "%%"), "-o", "IdentitiesOnly=yes"]
    return argv


def remote_command(argv: Sequence[str], cwd: str | None = None) -> str:
    """The one string ssh sends: the login shell only sees quoted words."""
    if not argv:
        raise UsageError("empty remote command")
    if cwd is None:
        words = ["exec", "sh", "-c", 'exec "$@"', "sh", *argv]
    else:
        words = ["exec", "sh", "-c", 'cd "$1" || exit 127; shift; exec "$@"', "sh", cwd, *argv]
    return shlex.join(words)


class SshTransport(Transport):
    """Runs commands with ``ssh`` and copies files with ``rsync`` over the same connection."""

    def __init__(self, target: SshTarget) -> None:
        self.target = target
        self.host = target.label

    def run(
        self,
        argv: Sequence[str],
        *,
        input: bytes | None = None,
        timeout: float | None = 60.0,
        cwd: str | None = None,
    ) -> CommandResult:
        full = [*ssh_argv(self.target), self.target.destination, "--", remote_command(argv, cwd)]
        try:
            with CommandLog(log, "ssh", full) as logged:
                proc = subprocess.run(
                    full,
                    input=input if input is not None else b"",
                    capture_output=True,
                    timeout=timeout,
                    check=False,
                )
                logged.returncode = proc.returncode
        except subprocess.TimeoutExpired as exc:
            raise TransportError(
                f"`{argv[0]}` on {self.host} gave no answer within {timeout}s",
                host=self.host,
                fix="check the machine (console) and the network; the "
                "command may still be running there",
            ) from exc
        except FileNotFoundError as exc:
            raise TransportError(
                "the OpenSSH client (`ssh`) is not installed", fix="install openssh-client"
            ) from exc
        result = CommandResult(tuple(argv), proc.returncode, proc.stdout, proc.stderr)
        if proc.returncode == SSH_EXIT_FAILURE:
            raise self.connection_error(result.stderr_tail())
        return result

    def connection_error(self, stderr_tail: str) -> TransportError:
        """Exit 255 from ssh (or rsync over it): the connection failed, not the command."""
        if any(marker in stderr_tail for marker in HOST_KEY_MARKERS):
            return HostKeyChangedError(
                f"the host key of {self.target.name} ({self.host}) changed since rgt first "
                "trusted it: this is a different machine behind the same address, or someone "
                "in the middle",
                host=self.host,
                returncode=SSH_EXIT_FAILURE,
                stderr_tail=stderr_tail,
                fix=f"if you re-rented or rebuilt the machine, re-trust it with "
                f"`rgt trust {self.target.name}`; otherwise do not connect",
            )
        return TransportError(
            f"ssh to {self.target.name} ({self.host}) failed: "
            f"{stderr_tail.strip().splitlines()[-1] if stderr_tail.strip() else 'exit 255'}",
            host=self.host,
            returncode=SSH_EXIT_FAILURE,
            stderr_tail=stderr_tail,
            fix="check that the machine is running and the ssh line is current (ports move "
            "on restart on some platforms); the job itself is not affected",
        )

    def put(self, local: Path, remote: str, *, progress: ProgressFn | None = None) -> None:
        from rgt.transport.rsync import Rsync

        source = f"{local}/" if local.is_dir() else str(local)
        Rsync(self).transfer([source], self.remote_spec(remote), progress=progress)

    def get(self, remote: str, local: Path, *, progress: ProgressFn | None = None) -> None:
        from rgt.transport.rsync import Rsync

        is_dir = self.run(["test", "-d", remote]).ok
        if is_dir:
            local.mkdir(parents=True, exist_ok=True)
        else:
            local.parent.mkdir(parents=True, exist_ok=True)
        source = self.remote_spec(remote + ("/" if is_dir else ""))
        Rsync(self).transfer([source], str(local), progress=progress)

    def remote_spec(self, path: str) -> str:
        """``host:path`` for rsync (with ``--protect-args`` the path is never shell-parsed)."""
        host = self.target.destination
        return f"[{host}]:{path}" if ":" in host else f"{host}:{path}"

    def close(self) -> None:
        """Stop the master connection (``ssh -O exit``); the next command opens a new one.
        The master answers before it removes its socket: wait (5 s at most) until it has."""
        socket = self._control_socket()
        argv = [*ssh_argv(self.target), "-O", "exit", self.target.destination]
        with CommandLog(log, "ssh", argv) as logged:
            logged.returncode = subprocess.run(
                argv, capture_output=True, timeout=30, check=False
            ).returncode
        deadline = time.monotonic() + (5 if logged.returncode == 0 else 0)  # a master answered
        while socket is not None and socket.exists() and time.monotonic() < deadline:
            time.sleep(0.02)

    def _control_socket(self) -> Path | None:
        """The master's socket path as ssh expands it (``ssh -G``), or None when it can't tell."""
        argv = [*ssh_argv(self.target), "-G", self.target.destination]
        result = subprocess.run(argv, capture_output=True, timeout=30, check=False)
        for line in result.stdout.decode("utf-8", "surrogateescape").splitlines():
            key, _, value = line.partition(" ")
            if key == "controlpath" and value.startswith("/") and "%" not in value:
                return Path(value)
        return None
