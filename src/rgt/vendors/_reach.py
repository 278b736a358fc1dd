"""Reaching a rented instance once the vendor says it runs: the agent is built and the profile
validated in a thread while the vendor provisions (``prebuild``), then sshd is awaited, the
instance registered as an ordinary SSH machine (host key trusted on first use) and the agent
installed in one ssh command (``register``)."""

from __future__ import annotations

import shlex
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from rgt.errors import VendorError
from rgt.models import Machine
from rgt.state.store import Store
from rgt.vendors._model import Instance

if TYPE_CHECKING:
    from rgt.vendors.lifecycle import VendorUp

Say = Callable[[str], None]


def _poll_s() -> float:
    from rgt.vendors.lifecycle import poll_interval

    return poll_interval()


def prebuild(platform: str) -> Callable[[], Path | None]:
    """Build the agent zipapp and load (validate) the profile in a thread, while the vendor
    provisions; the returned call waits for it (None if the build failed: ``install_agent``
    then builds it itself)."""
    from rgt.agent.build import build_agent
    from rgt.config import rgt_home
    from rgt.profiles import load_profile

    built: list[Path] = []
    dest = rgt_home() / "agent"

    def work() -> None:
        built.append(build_agent(dest))
        load_profile(platform)  # registration reads it: validated once per process

    thread = threading.Thread(target=work, daemon=True)
    thread.start()

    def wait() -> Path | None:
        thread.join()
        return built[0] if built else None

    return wait


def _install_agent(machine: Machine, prebuilt: Path | None) -> None:
    """The prebuilt agent in one ssh command (mkdir, temp file, rename); else the backend's
    own install (which builds it)."""
    from rgt.agent.build import agent_version
    from rgt.backends import get_backend
    from rgt.transport.base import whole_file_argv

    backend = get_backend(machine)
    remote = backend.root.agent_file(agent_version())
    if prebuilt is None or prebuilt.name != remote.rsplit("/", 1)[-1]:
        backend.install_agent()
        return
    data = prebuilt.read_bytes()
    argv = whole_file_argv(remote, len(data), make_parent=True)
    backend.transport.check(argv, input=data)


def register(
    store: Store,
    platform: str,
    name: str,
    ready: Instance,
    ask: VendorUp,
    root: str | None,
    say: Say,
    agent: Callable[[], Path | None],
) -> Machine:
    from rgt.backends.ssh import register_ssh

    assert ready.ssh_host and ready.ssh_port
    port, user = ask.ssh_port or ready.ssh_port, ask.ssh_user or ready.ssh_user
    _wait_for_port(ready.ssh_host, port, ask.timeout_s, say)
    key = ["-i", ask.identity_file] if ask.identity_file else []
    line = shlex.join(["ssh", "-p", str(port), *key, f"{user}@{ready.ssh_host}"])
    machine = register_ssh(
        store, platform, name, ssh_line=line, price=ready.price_per_hour, root=root
    )
    _install_agent(machine, agent())
    say(f"{name}: reachable over ssh, agent installed")
    return machine


def _wait_for_port(host: str, port: int, timeout_s: float, say: Say) -> None:
    deadline = time.monotonic() + timeout_s
    say(f"waiting for sshd on {host}:{port}")
    while True:
        try:
            with socket.create_connection((host, port), timeout=5):
                return
        except OSError as exc:
            if time.monotonic() > deadline:
                raise VendorError(
                    f"{host}:{port} refuses ssh connections ({exc})",
                    backend="ssh",
                    fix="check the image starts sshd; `rgt up … --resume` waits again",
                ) from exc
            time.sleep(min(_poll_s(), 1.0))
