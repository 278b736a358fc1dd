"""The SSH transport against a real OpenSSH server on 127.0.0.1."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from rgt.backends.ssh import retrust
from rgt.errors import ApprovalNeeded, HostKeyChangedError, TransportError
from rgt.state.store import Store
from rgt.transport.ssh import MAX_SOCKET_DIR, SshTransport, control_dir
from tests.conftest import HOSTILE_NAMES
from tests.sshd import SshServer, SshServers, no_pwned, register, target_for
from tests.ttys import PtyRgt


def test_arguments_arrive_verbatim_and_nothing_runs(sshd_server: SshServer, tmp_path: Path) -> None:
    transport = SshTransport(target_for(sshd_server))
    result = transport.run(["printf", "%s\\n", *HOSTILE_NAMES, "a\nb", "*"], cwd=str(tmp_path))
    assert result.ok, result.stderr
    assert result.stdout.decode() == "".join(f"{w}\n" for w in (*HOSTILE_NAMES, "a\nb", "*"))
    assert no_pwned(tmp_path)


def test_exit_code_stdin_and_cwd(sshd_server: SshServer, hostile_dir: Path) -> None:
    transport = SshTransport(target_for(sshd_server))
    assert transport.run(["sh", "-c", "exit 7"]).returncode == 7
    assert transport.run(["cat"], input=b"\x00bytes\xff").stdout == b"\x00bytes\xff"
    assert transport.run(["pwd"], cwd=str(hostile_dir)).stdout.decode() == f"{hostile_dir}\n"
    missing = transport.run(["pwd"], cwd=str(hostile_dir / "missing"))
    assert missing.returncode == 127


def test_a_remote_exit_255_is_not_mistaken_for_a_job_result(sshd_server: SshServer) -> None:
    # ssh's own failures exit 255; a command that exits 255 is indistinguishable, so rgt
    # reports it as a transport problem and never as a job verdict.
    transport = SshTransport(target_for(sshd_server))
    with pytest.raises(TransportError) as info:
        transport.run(["sh", "-c", "exit 255"])
    assert info.value.returncode == 255
    assert "job itself is not affected" in str(info.value.fix)


def test_connection_refused_is_a_transport_error(sshd_factory: SshServers) -> None:
    server = sshd_factory()
    transport = SshTransport(target_for(server))
    assert transport.run(["true"]).ok
    server.stop()
    try:
        with pytest.raises(TransportError) as info:
            transport.run(["true"])
        assert not isinstance(info.value, HostKeyChangedError)
        assert "Connection refused" in info.value.stderr_tail or "closed" in info.value.message
    finally:
        server.start()
    assert transport.run(["true"]).ok  # a new master connection replaces the dead one


def test_hard_timeout(sshd_server: SshServer) -> None:
    transport = SshTransport(target_for(sshd_server))
    with pytest.raises(TransportError, match="no answer within 1"):
        transport.run(["sleep", "30"], timeout=1)


def test_connections_are_reused(sshd_server: SshServer) -> None:
    transport = SshTransport(target_for(sshd_server))
    transport.close()
    for _ in range(3):
        assert transport.run(["true"]).ok
    sockets = [p for p in control_dir().iterdir() if p.is_socket()]
    assert len(sockets) == 1
    # One TCP connection carries every command: one sshd process per connection (plus its
    # privilege-separated child) no matter how many commands ran.
    before = len(sshd_server.sessions())
    for _ in range(3):
        assert transport.run(["true"]).ok
    assert len(sshd_server.sessions()) == before
    transport.close()
    # close() returns once the master has removed its socket, not merely asked it to stop.
    assert not [p for p in control_dir().iterdir() if p.is_socket()]


def test_an_rgt_home_right_at_the_socket_limit_connects(
    sshd_server: SshServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The longest RGT_HOME whose own ssh/ directory holds the sockets: ssh's temporary name
    # for the master socket (the %C hash plus a 17-character suffix) must still fit.
    base = Path(tempfile.mkdtemp(prefix="r", dir="/tmp"))
    try:
        pad = MAX_SOCKET_DIR - len(str(base / "h" / "ssh")) + 1
        home = base / ("h" * pad)
        assert len(str(home / "ssh")) == MAX_SOCKET_DIR
        monkeypatch.setenv("RGT_HOME", str(home))
        assert control_dir() == home / "ssh"
        transport = SshTransport(target_for(sshd_server))
        assert transport.run(["echo", "ok"]).stdout == b"ok\n"
        assert [p for p in control_dir().iterdir() if p.is_socket()]  # the master is up
        transport.close()
        assert not [p for p in control_dir().iterdir() if p.is_socket()]
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_changed_host_key_is_refused_then_retrusted(
    sshd_factory: SshServers, tmp_path: Path
) -> None:
    server = sshd_factory()
    machine = register(server, "rented", tmp_path / "root")
    first_key = machine.connection["host_key"]
    assert first_key and first_key.startswith("SHA256:")
    SshTransport(target_for(server, "rented")).close()
    server.new_host_key()
    transport = SshTransport(target_for(server, "rented"))
    with pytest.raises(HostKeyChangedError) as info:
        transport.run(["true"])
    assert "rgt trust rented" in str(info.value.fix)
    cli = [sys.executable, "-m", "rgt.cli"]
    refused = subprocess.run(
        [*cli, "push", "rented", str(tmp_path), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert refused.returncode == 1
    assert json.loads(refused.stdout)["error"] == "HostKeyChangedError"
    assert "rgt trust rented" in refused.stderr
    # No human, no trust: a script (stdin not a terminal) cannot accept the new key.
    unattended = subprocess.run(
        [*cli, "trust", "rented", "--json"],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=120,
    )
    assert unattended.returncode == 3, unattended.stderr
    assert "terminal" in json.loads(unattended.stdout)["message"]
    with pytest.raises(HostKeyChangedError):
        transport.run(["true"])
    # The library never asks a human itself: without a consent from a front end it refuses,
    # typed, with the command to run (what MCP or a script calling it gets).
    with pytest.raises(ApprovalNeeded) as needed:
        retrust(Store.open(), "rented")
    assert needed.value.command == "rgt trust rented" and needed.value.exit_code == 3
    assert Store.open().machine("rented").connection["host_key"] == first_key
    # The human sees the key the machine presents now, then types the name.
    human = PtyRgt("trust", "rented", "--json")
    human.expect("Type rented to approve")
    assert b"recorded: " + first_key.encode() in human.seen
    human.type("rented")
    assert human.wait() == 0, human.seen
    new_key = Store.open().machine("rented").connection["host_key"]
    assert new_key not in (None, first_key) and new_key.encode() in human.seen
    assert transport.run(["true"]).ok


@pytest.mark.parametrize("home_name", ["h o'm\"e %C", "x" * 90])
def test_odd_or_long_rgt_home(
    sshd_server: SshServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, home_name: str
) -> None:
    # A unix socket path must fit in ~104 bytes and ssh expands %-tokens and splits quotes
    # in option values: neither may break the connection.
    home = tmp_path / home_name
    monkeypatch.setenv("RGT_HOME", str(home))
    transport = SshTransport(target_for(sshd_server))
    assert transport.run(["echo", "ok"]).stdout == b"ok\n"
    assert (home / "known_hosts" / "box").read_text().count("ssh-ed25519") == 1
    source = tmp_path / "src"
    source.mkdir()
    (source / "f").write_bytes(os.urandom(1000))
    transport.put(source, str(tmp_path / "dst"))
    assert (tmp_path / "dst" / "f").read_bytes() == (source / "f").read_bytes()
    transport.close()
