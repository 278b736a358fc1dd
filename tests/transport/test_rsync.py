"""rsync over the SSH transport: hostile names, symlinks, progress, drops mid-transfer."""

from __future__ import annotations

import hashlib
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from rgt.errors import BackendError, TransportError, VerifyError
from rgt.jobs.push import push
from rgt.state.store import Store
from rgt.transport import ssh
from rgt.transport.remote_hash import FINISHED, UNKNOWN, hash_input, machine_script, remote_sha256
from rgt.transport.rsync import PARTIAL_DIR, RETRYABLE, Rsync, TransferReport
from rgt.transport.ssh import SshTransport
from tests.conftest import HOSTILE_NAMES, TmpfsMount
from tests.sshd import SshServer, SshServers, no_pwned, register, target_for, wait_for


def hostile_tree(root: Path) -> Path:
    """Every hostile name as a directory and a file, plus a symlink with a hostile name."""
    tree = root / "tree $(touch PWNED)"
    for index, name in enumerate(HOSTILE_NAMES):
        (tree / name).mkdir(parents=True)
        (tree / name / f"{name}.bin").write_bytes(os.urandom(1000 + index))
        (tree / f"top {name}").write_text(f"{name}\n")
    (tree / "empty").write_bytes(b"")
    (tree / "link $(touch PWNED) 'q'").symlink_to(f"{HOSTILE_NAMES[0]}/{HOSTILE_NAMES[0]}.bin")
    return tree


def snapshot_of(tree: Path) -> dict[str, bytes | str]:
    """Relative path → file bytes, or the link target for symlinks."""
    found: dict[str, bytes | str] = {}
    for path in sorted(tree.rglob("*")):
        rel = path.relative_to(tree).as_posix()
        if path.is_symlink():
            found[rel] = os.readlink(path)
        elif path.is_file():
            found[rel] = path.read_bytes()
    return found


def test_push_then_pull_round_trip_is_byte_identical(
    sshd_server: SshServer, tmp_path: Path
) -> None:
    tree = hostile_tree(tmp_path / "local")
    register(sshd_server, "box", tmp_path / "remote root")
    seen: list[tuple[int, int | None]] = []
    report = push(
        Store.open(),
        "box",
        [tree],
        to="incoming 'data'",
        progress=lambda done, total: seen.append((done, total)),
    )
    remote = tmp_path / "remote root" / "incoming 'data'" / tree.name
    assert report.remote == str(remote.parent)
    assert snapshot_of(remote) == snapshot_of(tree)
    regular = {k: v for k, v in snapshot_of(tree).items() if isinstance(v, bytes)}
    assert {f.path for f in report.files} == {f"{tree.name}/{k}" for k in regular}
    assert report.total_bytes == sum(len(v) for v in regular.values())
    assert seen and seen[-1][0] == report.total_bytes
    back = tmp_path / "pulled"
    SshTransport(target_for(sshd_server)).get(str(remote), back)
    assert snapshot_of(back) == snapshot_of(tree)
    assert no_pwned(tmp_path)


def test_a_trailing_slash_pushes_the_folders_contents(
    sshd_server: SshServer, tmp_path: Path
) -> None:
    tree = hostile_tree(tmp_path / "local")
    register(sshd_server, "box", tmp_path / "remote root")
    report = push(Store.open(), "box", [f"{tree}/"])
    remote = tmp_path / "remote root" / "data"
    assert report.remote == str(remote)
    assert snapshot_of(remote) == snapshot_of(tree)  # no tree.name level in between
    regular = {k for k, v in snapshot_of(tree).items() if isinstance(v, bytes)}
    assert {f.path for f in report.files} == regular
    assert no_pwned(tmp_path)


def test_repush_sends_nothing(sshd_server: SshServer, tmp_path: Path) -> None:
    tree = hostile_tree(tmp_path / "local")
    register(sshd_server, "box", tmp_path / "root")
    first = push(Store.open(), "box", [tree])
    again = push(Store.open(), "box", [tree])
    assert first.sent_bytes == first.total_bytes
    assert again.sent_bytes == 0 and again.files == first.files


def _arrived(dest: Path) -> int:
    return sum(p.stat().st_size for p in dest.rglob("*") if p.is_file())


def _receiver_saved_partial(dest: Path) -> bool:
    temps = [p for p in dest.rglob(".*") if p.is_file() and PARTIAL_DIR not in p.parts]
    return not temps and any(dest.rglob(f"{PARTIAL_DIR}/*"))


def test_sshd_stopped_mid_push_resumes_without_resending(
    sshd_factory: SshServers, tmp_path: Path
) -> None:
    server = sshd_factory()
    source = tmp_path / "data"
    source.mkdir()
    (source / "a-big.bin").write_bytes(os.urandom(12 << 20))
    for index in range(4):
        (source / f"small-{index}.bin").write_bytes(os.urandom(1 << 20))
    total = sum(p.stat().st_size for p in source.iterdir())
    dest = tmp_path / "dest"
    dest.mkdir()
    transport = SshTransport(target_for(server))
    rsync = Rsync(transport, bwlimit_kbps=4000, backoff_s=0.5, max_backoff_s=2)
    reports: list[TransferReport] = []
    worker = threading.Thread(
        target=lambda: reports.append(
            rsync.transfer([str(source)], transport.remote_spec(f"{dest}/"))
        )
    )
    worker.start()
    assert wait_for(lambda: _arrived(dest) >= 4 << 20, timeout=60)
    server.stop()
    assert wait_for(lambda: _receiver_saved_partial(dest), timeout=30)
    arrived = _arrived(dest)
    server.start()
    worker.join(timeout=120)
    assert reports, "the transfer did not finish after sshd came back"
    report = reports[0]
    final = report.attempts[-1]
    assert len(report.attempts) >= 2 and final.returncode == 0
    assert all(a.returncode in RETRYABLE for a in report.attempts[:-1])
    resent = final.literal_bytes - (total - arrived)
    assert 0 <= arrived < total
    assert resent <= 0.01 * total, (resent, arrived, final)
    assert final.matched_bytes > 0
    assert snapshot_of(dest / "data") == snapshot_of(source)
    assert not (dest / "data" / PARTIAL_DIR).exists()


def test_a_machine_that_is_gone_gets_a_bounded_wait_not_the_whole_backoff(
    sshd_factory: SshServers, tmp_path: Path
) -> None:
    """Attempts that move nothing (connection refused) share ``patience_s`` of waiting; the
    default backoff (1, 2, 4 ... 30 s, 8 retries) once kept `rgt run` silent for two minutes."""
    server = sshd_factory()
    source = tmp_path / "f.bin"
    source.write_bytes(b"x" * 100)
    transport = SshTransport(target_for(server))
    server.stop()
    rsync = Rsync(transport, backoff_s=0.2, patience_s=1.0)
    started = time.monotonic()
    with pytest.raises(TransportError) as info:
        rsync.transfer([str(source)], transport.remote_spec(f"{tmp_path}/dest/"))
    spent = time.monotonic() - started
    # waits of 0.2 and 0.4 s, and the attempts' own time; 0.8 more is past 1 s
    assert 2 <= _attempts(info.value) <= 3, info.value.message
    assert spent < 10, spent
    assert Rsync(transport).patience_s == 60  # a launch on a dead machine ends in about 35 s


def test_a_frozen_machine_ends_the_retries_once_nothing_moved_for_the_patience(
    sshd_factory: SshServers, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A machine that takes connections and never answers (frozen: its sshd stopped) holds
    each attempt until ssh's ConnectTimeout (or rsync's --timeout): that time counts against
    ``patience_s`` with the waits. When only the waits counted, 8 retries of a minute each
    kept `rgt run` silent for ten minutes."""
    server = sshd_factory()
    source = tmp_path / "f.bin"
    source.write_bytes(b"x" * 100)
    transport = SshTransport(target_for(server))
    monkeypatch.setattr(ssh, "CONNECT_TIMEOUT_S", 2)
    assert server.proc is not None
    os.kill(server.proc.pid, signal.SIGSTOP)
    try:
        rsync = Rsync(transport, backoff_s=0.2, patience_s=3.0)
        started = time.monotonic()
        with pytest.raises(TransportError) as info:
            rsync.transfer([str(source)], transport.remote_spec(f"{tmp_path}/dest/"))
        spent = time.monotonic() - started
    finally:
        os.kill(server.proc.pid, signal.SIGCONT)
    # about 2 s each: the second ends past the 3 s (the waits alone allowed five)
    assert len(info.value.message) and _attempts(info.value) <= 2, info.value.message
    assert spent < 8, spent


def _attempts(error: TransportError) -> int:
    """How many attempts the error says were made (``... failed N times ...``)."""
    return int(error.message.split(" failed ")[1].split()[0])


def test_a_data_error_is_not_retried(sshd_server: SshServer, tmp_path: Path) -> None:
    source = tmp_path / "f.bin"
    source.write_bytes(b"x" * 100)
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where a directory should be")
    transport = SshTransport(target_for(sshd_server))
    with pytest.raises(BackendError) as info:
        Rsync(transport, backoff_s=30).transfer(
            [str(source)], transport.remote_spec(f"{blocker}/sub/")
        )
    assert info.value.returncode not in RETRYABLE
    assert "did not retry" in str(info.value.fix)


def test_crlf_scripts_are_reported(sshd_server: SshServer, tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "prep.sh").write_bytes(b"set -e\r\necho prep\r\n")
    (data / "launch").write_bytes(b"#!/usr/bin/env bash\r\necho go\r\n")
    (data / "fine.sh").write_bytes(b"#!/bin/sh\necho ok\n")
    (data / "table.csv").write_bytes(b"a,b\r\n1,2\r\n")  # CRLF data is data, not a script
    register(sshd_server, "box", tmp_path / "root")
    notices: list[str] = []
    report = push(Store.open(), "box", [data], notice=notices.append)
    assert sorted(report.crlf_scripts) == ["data/launch", "data/prep.sh"]
    assert len(notices) == 2 and all("bad interpreter" in n for n in notices)


PYTHON_38 = Path.home() / ".pyenv" / "versions" / "3.8.18" / "bin" / "python3"


def hashing_tree(root: Path) -> tuple[Path, list[str]]:
    """A big file (many read blocks), many small ones, an empty one, hostile names, and paths
    that cannot be read as files; listed in a shuffled order unlike the biggest-first work."""
    base = root / "base $(touch PWNED) 'q'"
    rng = random.Random(7)
    rels = []
    for index in range(120):
        name = HOSTILE_NAMES[index % len(HOSTILE_NAMES)]
        (base / name).mkdir(parents=True, exist_ok=True)
        (base / name / f"{index} {name}.bin").write_bytes(os.urandom(rng.randrange(1, 300_000)))
        rels.append(f"{name}/{index} {name}.bin")
    (base / "big ü.bin").write_bytes(os.urandom(9 << 20))
    (base / "empty").write_bytes(b"")
    (base / "dangling 'link'").symlink_to("nowhere")
    (base / "a directory.bin").mkdir()
    rels += ["big ü.bin", "empty", "dangling 'link'", "a directory.bin", "missing $(x)"]
    rng.shuffle(rels)
    return base, rels


def one_thread_reference(base: Path, rels: list[str]) -> list[str]:
    found = []
    for rel in rels:
        path = base / rel
        regular = path.is_file()
        found.append(hashlib.sha256(path.read_bytes()).hexdigest() if regular else "-")
    return found


PYTHONS = pytest.mark.parametrize("python", [sys.executable, str(PYTHON_38)], ids=["this", "3.8"])


def start_hasher(python: str, base: Path, *threads: str) -> subprocess.Popen[bytes]:
    if not Path(python).exists():
        pytest.skip(f"{python} is not installed")
    return subprocess.Popen(
        [python, "-c", machine_script(), str(base), *threads],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def expectations(base: Path, rels: list[str]) -> list[tuple[int, int]]:
    """What the local side sends: size and mtime of the file as it should land."""
    found = []
    for rel in rels:
        path = base / rel
        found.append(
            (path.stat().st_size, int(path.stat().st_mtime)) if path.is_file() else UNKNOWN
        )
    return found


@PYTHONS
def test_the_machine_side_hasher_matches_one_thread_in_order(python: str, tmp_path: Path) -> None:
    base, rels = hashing_tree(tmp_path)
    expected = one_thread_reference(base, rels)
    assert expected.count("-") == 3
    unknown = [UNKNOWN] * len(rels)
    for threads, known in [([], unknown), (["1"], unknown), (["3"], unknown), (["16"], None)]:
        stdin = hash_input(rels, known or expectations(base, rels)) + FINISHED
        out, err = start_hasher(python, base, *threads).communicate(stdin, timeout=120)
        assert out.decode().splitlines() == expected, (threads, err)
    assert no_pwned(tmp_path)


def read_since(path: Path) -> bool:
    """Was the file read since its access time was set to 0? (ext4 and tmpfs update atime
    on the first read after an atime older than mtime, even with relatime)."""
    return path.stat().st_atime > 0


def land(path: Path, data: bytes, mtime: int) -> None:
    """As rsync does: a temporary name, the mtime, then a rename into place."""
    temp = path.with_name(f".{path.name}.tmp")
    temp.write_bytes(data)
    os.utime(temp, (0, mtime))
    temp.rename(path)


@PYTHONS
def test_files_are_hashed_as_they_land_and_again_if_they_change(
    python: str, tmp_path: Path
) -> None:
    base = tmp_path / "dest $(touch PWNED)"
    base.mkdir()
    mtime = 1_700_000_000
    rels = ["replaced 'q'.bin", "rewritten ü.bin", "lands later.bin", "never arrives.bin"]
    land(base / rels[0], os.urandom(3 << 20), mtime)
    land(base / rels[1], os.urandom(3 << 20), mtime)
    known = [(3 << 20, mtime), (3 << 20, mtime), (2 << 20, mtime), (10, mtime)]
    hasher = start_hasher(python, base)
    assert hasher.stdin is not None
    hasher.stdin.write(hash_input(rels, known))
    hasher.stdin.flush()
    assert wait_for(lambda: read_since(base / rels[0]) and read_since(base / rels[1]), 60)
    land(base / rels[0], os.urandom(3 << 20), mtime)  # a new file under the same name
    with (base / rels[1]).open("r+b") as handle:  # the same file, rewritten in place
        handle.write(os.urandom(1 << 20))
    os.utime(base / rels[1], (0, mtime))
    land(base / rels[2], os.urandom(2 << 20), mtime)
    assert wait_for(lambda: read_since(base / rels[2]), 60)  # hashed before the end
    out, err = hasher.communicate(FINISHED, timeout=60)
    assert hasher.returncode == 0, err
    assert out.decode().splitlines() == one_thread_reference(base, rels)
    assert no_pwned(tmp_path)


@PYTHONS
def test_the_hasher_stops_when_the_push_ends_without_finishing(python: str, tmp_path: Path) -> None:
    base, rels = hashing_tree(tmp_path)
    hasher = start_hasher(python, base)
    out, _ = hasher.communicate(hash_input(rels, expectations(base, rels)), timeout=60)
    assert hasher.returncode == 3 and out == b""


def test_remote_sha256_over_ssh_matches_one_thread(sshd_server: SshServer, tmp_path: Path) -> None:
    base, rels = hashing_tree(tmp_path)
    transport = SshTransport(target_for(sshd_server))
    found = remote_sha256(transport, "python3", str(base), rels)
    expected = one_thread_reference(base, rels)
    assert list(found) == rels
    assert list(found.values()) == [None if h == "-" else h for h in expected]
    assert no_pwned(tmp_path)


def test_a_file_rsync_skips_is_still_checked(sshd_server: SshServer, tmp_path: Path) -> None:
    """Same size and mtime at the destination, other bytes: rsync's quick check skips the
    file; the machine's sha256 still sees that what is there is not what was pushed."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "weights.bin").write_bytes(os.urandom(4096))
    register(sshd_server, "box", tmp_path / "root")
    push(Store.open(), "box", [data])
    landed = tmp_path / "root" / "data" / "data" / "weights.bin"
    stamp = landed.stat()
    landed.write_bytes(os.urandom(4096))
    os.utime(landed, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    with pytest.raises(VerifyError, match="1 pushed file"):
        push(Store.open(), "box", [data])


def hashers_on(base: Path) -> list[int]:
    """Processes running the machine-side hasher on ``base``."""
    wanted = os.fsencode(base) + b"\0"
    found = []
    for entry in Path("/proc").iterdir():
        try:
            argv = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if entry.name.isdigit() and b"\0-c\0" in argv and argv.endswith(wanted):
            found.append(int(entry.name))
    return found


def test_a_failed_push_leaves_no_hasher_behind(
    sshd_server: SshServer, small_tmpfs: TmpfsMount, tmp_path: Path
) -> None:
    disk = small_tmpfs("1m", 100)
    data = tmp_path / "data"
    data.mkdir()
    (data / "small.bin").write_bytes(os.urandom(1000))
    (data / "too big.bin").write_bytes(os.urandom(3 << 20))
    register(sshd_server, "box", disk)
    with pytest.raises(BackendError) as info:
        push(Store.open(), "box", [data])
    assert "No space left" in str(info.value.stderr_tail)
    assert wait_for(lambda: not hashers_on(disk / "data"), timeout=30)
