"""A real OpenSSH server for tests: Debian's ``/usr/sbin/sshd`` on a free loopback port.

Host and user ed25519 keys are generated per test session in a temp dir; root logs in with the
user key and remote commands run on this same machine. The server can be stopped (listener and
every live session, so a transfer in flight really breaks), restarted on the same port, given a
new host key (what a rental that reuses an address looks like), or started inside a network
namespace so it is a separate host with its own address.

Fixtures: ``sshd_server`` (one per session, shared — tests that stop it restart it) and
``sshd_factory`` (a private server per call, stopped at the end of the session).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

SSHD = Path("/usr/sbin/sshd")
PRIVSEP_DIR = Path("/run/sshd")


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def keygen(path: Path) -> Path:
    path.unlink(missing_ok=True)
    path.with_suffix(".pub").unlink(missing_ok=True)
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "rgt-test", "-f", str(path)],
        check=True,
    )
    return path


def _children(pid: int) -> list[int]:
    """Every descendant of ``pid`` (the per-connection sshd processes and their commands)."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        parents.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _is_sshd(pid: int) -> bool:
    try:
        return os.readlink(f"/proc/{pid}/exe") == str(SSHD)
    except OSError:
        return False


class SshServer:
    """One sshd. ``address`` is 127.0.0.1, or the namespace's own address when ``netns``."""

    def __init__(
        self,
        workdir: Path,
        client_key: Path,
        *,
        netns: str | None = None,
        address: str = "127.0.0.1",
        port: int | None = None,
    ) -> None:
        self.workdir = workdir
        self.client_key = client_key
        self.netns = netns
        self.address = address
        self.port = port or (22 if netns else free_port())
        self.host_key = workdir / "host_ed25519"
        self.config = workdir / "sshd_config"
        self.log = workdir / "sshd.log"
        self.proc: subprocess.Popen[bytes] | None = None
        workdir.mkdir(parents=True, exist_ok=True)
        keygen(self.host_key)
        self._write_config()

    def _write_config(self) -> None:
        authorized = self.workdir / "authorized_keys"
        authorized.write_text(self.client_key.with_suffix(".pub").read_text())
        self.config.write_text(
            "\n".join(
                [
                    f"Port {self.port}",
                    f"ListenAddress {self.address}",
                    f"HostKey {self.host_key}",
                    f"AuthorizedKeysFile {authorized}",
                    f"PidFile {self.workdir / 'sshd.pid'}",
                    "PasswordAuthentication no",
                    "KbdInteractiveAuthentication no",
                    "PermitRootLogin prohibit-password",
                    "UsePAM no",
                    "StrictModes no",
                    "MaxSessions 64",
                    "MaxStartups 64",
                    "LogLevel VERBOSE",
                    # bash sources ~/.bashrc for ssh commands unless nested; this machine's
                    # runs `pyenv init` (~150 ms a command). Rentals have their own; tests
                    # want speed, not this box's shell start-up.
                    "SetEnv SHLVL=1",
                    "",
                ]
            )
        )

    @property
    def ssh_line(self) -> str:
        """The line a platform console would show for this server."""
        return f"ssh -p {self.port} -i {self.client_key} root@{self.address}"

    def start(self) -> None:
        PRIVSEP_DIR.mkdir(mode=0o755, exist_ok=True)
        argv = [str(SSHD), "-D", "-f", str(self.config), "-E", str(self.log)]
        if self.netns:
            argv = ["ip", "netns", "exec", self.netns, *argv]
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL)
        self._wait_ready()

    def _wait_ready(self, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(f"sshd exited: {self.log.read_text(errors='replace')}")
            try:
                with socket.create_connection((self.address, self.port), timeout=1):
                    return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"sshd did not listen on {self.address}:{self.port}")

    def stop(self) -> None:
        """Kill the listener and every connection's sshd: transfers in flight break as on a
        network drop. Commands started over ssh are not killed; they see their pipes close."""
        if self.proc is None or self.proc.poll() is not None:
            return
        sessions = [pid for pid in _children(self.proc.pid) if _is_sshd(pid)]
        self.proc.send_signal(signal.SIGKILL)
        for pid in sessions:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.proc.wait(timeout=10)

    def restart(self) -> None:
        self.stop()
        self.start()

    def new_host_key(self) -> None:
        """The same address now answers with another host key (a re-rented machine)."""
        self.stop()
        keygen(self.host_key)
        self.start()

    def sessions(self) -> list[int]:
        return _children(self.proc.pid) if self.proc else []


class SshServers:
    """Makes servers that share the session's client key; stops them all at the end."""

    def __init__(self, base: Path) -> None:
        self.base = base
        base.mkdir(parents=True, exist_ok=True)
        self.client_key = keygen(base / "client_ed25519")
        self.servers: list[SshServer] = []

    def __call__(self, **kwargs: object) -> SshServer:
        workdir = self.base / f"server-{len(self.servers)}"
        server = SshServer(workdir, self.client_key, **kwargs)  # type: ignore[arg-type]
        self.servers.append(server)
        server.start()
        return server

    def close(self) -> None:
        for server in self.servers:
            server.stop()


@pytest.fixture(scope="session")
def sshd_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshServers]:
    if not SSHD.exists():
        pytest.skip("/usr/sbin/sshd is missing (./dev.sh test installs openssh-server)")
    servers = SshServers(tmp_path_factory.mktemp("sshd"))
    yield servers
    servers.close()


@pytest.fixture(scope="session")
def sshd_server(sshd_factory: SshServers) -> SshServer:
    return sshd_factory()


def wait_for(predicate: Callable[[], bool], timeout: float = 60.0, step: float = 0.1) -> bool:
    """Poll ``predicate`` until true or ``timeout``; tests assert on the returned value."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return predicate()


def target_for(server: SshServer, name: str = "box") -> Any:
    """An ``SshTarget`` for ``server`` with its known_hosts under the test's RGT_HOME."""
    from rgt.transport.ssh import SshTarget, known_hosts_path

    return SshTarget(
        name=name,
        host=server.address,
        port=server.port,
        user="root",
        identity_file=str(server.client_key),
        known_hosts=str(known_hosts_path(name)),
    )


def register(server: SshServer, name: str, root: Path, profile: str = "generic-ssh") -> Any:
    """Register ``server`` as machine ``name`` the way `rgt up` does (library call)."""
    from rgt.backends.ssh import register_ssh
    from rgt.state.store import Store

    return register_ssh(Store.open(), profile, name, ssh_line=server.ssh_line, root=str(root))


def no_pwned(*roots: Path) -> bool:
    """No ``$(touch PWNED)`` ran: not under ``roots``, nor where a shell would have run it
    (the remote home, the current directory, ``/``)."""
    spots = [Path.home(), Path.cwd(), Path("/"), Path(tempfile.gettempdir())]
    return not any(list(r.rglob("PWNED")) for r in roots) and not any(
        (spot / "PWNED").exists() for spot in spots
    )


def add_unreachable(store: Any, name: str, known_hosts: Path, price: float) -> None:
    """Record an ssh machine that nobody answers (127.0.0.1 port 9, discard: closed here),
    registered long ago, the way `rgt up` would have."""
    from rgt.models import Machine

    store.add_machine(
        Machine(
            name=name,
            backend="ssh",
            profile="generic-ssh",
            connection={
                "host": "127.0.0.1",
                "port": 9,
                "user": "root",
                "known_hosts": str(known_hosts),
            },
            durable_root="/root",
            price_per_hour=price,
            registered="2026-01-01T00:00:00.000000Z",
        )
    )
