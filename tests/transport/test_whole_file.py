"""A file written to a machine arrives whole or not at all.

When the connection drops mid-transfer, the remote shell keeps running with its stdin closed:
``cat`` ends as if the data were complete. Renaming that temp file into place would install a
truncated agent (every later call on the machine then fails) or a cut spec. The write checks
the byte count before the rename.
"""

from __future__ import annotations

import subprocess
import threading
import time
from pathlib import Path

import pytest

from rgt.errors import RgtError
from rgt.transport.base import whole_file_argv
from rgt.transport.ssh import SshTransport
from tests.sshd import SshServers, target_for


@pytest.mark.parametrize("sent", [0, 1, 99])
def test_a_short_stream_never_becomes_the_file(tmp_path: Path, sent: int) -> None:
    target = tmp_path / "agent it's.pyz"
    target.write_bytes(b"the old whole file")
    proc = subprocess.run(
        whole_file_argv(str(target), 100), input=b"x" * sent, capture_output=True, timeout=30
    )
    assert proc.returncode == 1
    assert f"{sent} of 100 bytes arrived" in proc.stderr.decode()
    assert target.read_bytes() == b"the old whole file"
    assert sorted(p.name for p in tmp_path.iterdir()) == [target.name]  # no temp file left


def test_a_whole_stream_replaces_the_file_and_makes_its_folder(tmp_path: Path) -> None:
    target = tmp_path / "new dir" / "spec.json"
    argv = whole_file_argv(str(target), 5, make_parent=True)
    proc = subprocess.run(argv, input=b"hello", capture_output=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert target.read_bytes() == b"hello"
    assert [p.name for p in target.parent.iterdir()] == ["spec.json"]


def test_sshd_killed_mid_write_leaves_no_file(sshd_factory: SshServers, tmp_path: Path) -> None:
    server = sshd_factory()
    transport = SshTransport(target_for(server))
    target = tmp_path / "agent.pyz"
    partials = lambda: list(tmp_path.glob("agent.pyz.rgt-tmp.*"))  # noqa: E731
    data = b"\x00agent" * (48 * 1024 * 1024)  # 288 MiB: long enough to cut on the way
    errors: list[BaseException] = []

    def write() -> None:
        try:
            transport.write_bytes(str(target), data)
        except BaseException as exc:  # reported below
            errors.append(exc)

    writer = threading.Thread(target=write)
    writer.start()
    deadline = time.monotonic() + 60
    while not any(p.stat().st_size > 1024 * 1024 for p in partials()):
        assert time.monotonic() < deadline and writer.is_alive(), "the transfer never started"
        time.sleep(0.001)
    server.stop()  # the listener and the session: the connection drops mid-transfer
    writer.join(timeout=60)
    assert not writer.is_alive()
    assert errors and isinstance(errors[0], RgtError), errors
    # The remote shell outlives the connection; it must remove the cut copy, never rename it.
    deadline = time.monotonic() + 30
    while partials() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not partials()
    assert not target.exists()
    transport.close()


def test_writers_of_one_file_at_once_each_write_it_whole(tmp_path: Path) -> None:
    # Three `rgt run` at once on one machine each upload the agent: with one temp name shared by
    # every writer, one renamed it away while another was still counting its bytes (exit 1).
    target = tmp_path / "agent.pyz"
    payloads = [bytes([i]) * (4 * 1024 * 1024) for i in range(8)]
    procs = [
        subprocess.Popen(
            whole_file_argv(str(target), len(data)),
            stdin=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for data in payloads
    ]
    threads = [
        threading.Thread(target=proc.communicate, args=(data,))
        for proc, data in zip(procs, payloads, strict=True)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert [proc.wait(timeout=60) for proc in procs] == [0] * len(procs)
    assert target.read_bytes() in payloads
    assert sorted(p.name for p in tmp_path.iterdir()) == [target.name]
