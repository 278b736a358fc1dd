"""The SSH backend against a real sshd: registration, detached jobs that outlive the
connection, secrets over stdin, tmux, code snapshots, the meter-stop text."""

from __future__ import annotations

import json
import os
import subprocess
import time
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from rgt.backends import get_backend
from rgt.backends.ssh import SshBackend
from rgt.errors import TransportError
from rgt.models import TERMINAL, JobSpec, JobState
from rgt.state.store import Store, utcnow
from tests import clirun
from tests.backends.conformance import status_doc
from tests.sshd import SshServer, SshServers, no_pwned, register, wait_for

SECRET = "tok-7f3a-very-secret"
# The job proves the secret reached its environment and appears in no process's argv.
JOB = """
import os, pathlib, sys, time
time.sleep(float(sys.argv[1]))
secret = os.environ["TOKEN"].encode()
in_argv = []
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        if secret in pathlib.Path("/proc", pid, "cmdline").read_bytes():
            in_argv.append(pid)
    except OSError:
        pass
out = pathlib.Path(os.environ["RGT_OUTPUT_DIR"])
(out / "result.txt").write_text("token=%d argv=%s" % (len(secret), in_argv))
print("job done", flush=True)
"""


rgt = partial(clirun.rgt, timeout=180)


def submit(backend: SshBackend, job_id: str, sleep_s: float) -> None:
    spec = JobSpec(
        job_id=job_id,
        machine=backend.machine.name,
        command=(backend.python, "-c", JOB, str(sleep_s)),
        secret_env=("TOKEN",),
        created=utcnow(),
    )
    backend.submit(spec, {"TOKEN": SECRET})


def files_contain(root: Path, needle: bytes) -> list[Path]:
    return [
        p
        for p in root.rglob("*")
        if p.is_file() and not p.is_symlink() and needle in p.read_bytes()
    ]


def test_rgt_up_registers_over_the_real_cli(sshd_server: SshServer, tmp_path: Path) -> None:
    root = tmp_path / "durable 'root'"
    proc = rgt(
        "up",
        "generic-ssh",
        "--name",
        "box",
        "--ssh",
        sshd_server.ssh_line,
        "--root",
        str(root),
        "--price",
        "0.5",
        "--json",
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert (doc["machine"], doc["backend"], doc["durable_root"]) == ("box", "ssh", str(root))
    assert any("forgotten" in note or "billing" in note for note in doc["notes"])
    assert (root / ".rgt").is_dir()
    machine = Store.open().machine("box")
    assert machine.connection["port"] == sshd_server.port
    assert machine.connection["host_key"].startswith("SHA256:")
    known = Path(machine.connection["known_hosts"])
    assert known.parent == Path(os.environ["RGT_HOME"]) / "known_hosts"
    assert sshd_server.host_key.with_suffix(".pub").read_text().split()[1] in known.read_text()


def test_rgt_up_refuses_a_line_with_a_command(sshd_server: SshServer) -> None:
    proc = rgt(
        "up",
        "generic-ssh",
        "--name",
        "box",
        "--ssh",
        f"{sshd_server.ssh_line} rm -rf /tmp/x",
        "--json",
    )
    assert proc.returncode == 2
    assert "remote command" in json.loads(proc.stdout)["message"]


def test_job_finishes_while_sshd_is_down(sshd_factory: SshServers, tmp_path: Path) -> None:
    server = sshd_factory()
    backend = get_backend(register(server, "box", tmp_path / "root"))
    assert isinstance(backend, SshBackend)
    submit(backend, "survivor", sleep_s=2)
    assert status_doc(backend, "survivor")["state"] in ("queued", "running")
    backend.ssh.close()
    server.stop()
    try:
        with pytest.raises(TransportError):  # a dead link is not a dead job
            status_doc(backend, "survivor")
        done = Path(backend.job_paths("survivor").done)
        assert wait_for(done.exists, timeout=60), "the job did not finish without ssh"
    finally:
        server.start()
    status = status_doc(backend, "survivor")
    assert status["state"] == "succeeded" and status["done"] is True
    result = (tmp_path / "root/.rgt/jobs/survivor/outputs/result.txt").read_text()
    assert result == f"token={len(SECRET)} argv=[]"
    assert not files_contain(tmp_path / "root", SECRET.encode())
    assert not files_contain(Path(os.environ["RGT_HOME"]), SECRET.encode())


def test_tmux_detach_when_the_profile_says_so(sshd_server: SshServer, tmp_path: Path) -> None:
    # AutoDL's profile detaches with tmux (its gateway killed long-lived nohup processes).
    backend = get_backend(register(sshd_server, "adl", tmp_path / "root", profile="autodl"))
    assert isinstance(backend, SshBackend)
    submit(backend, "in-tmux", sleep_s=3)
    assert wait_for(lambda: _tmux_has("rgt-in-tmux"), timeout=30)
    status = _wait_terminal(backend, "in-tmux")
    assert status["state"] == "succeeded"
    result = (tmp_path / "root/.rgt/jobs/in-tmux/outputs/result.txt").read_text()
    assert result == f"token={len(SECRET)} argv=[]"
    # the fifo is gone (waited for: a job another xdist worker submits has one for a moment)
    assert wait_for(lambda: not list(Path("/tmp").glob("rgt-secrets-*")), timeout=30)
    assert wait_for(lambda: not _tmux_has("rgt-in-tmux"), timeout=30)


def _tmux_has(session: str) -> bool:
    return (
        subprocess.run(
            ["tmux", "has-session", "-t", session], capture_output=True, check=False
        ).returncode
        == 0
    )


def _wait_terminal(backend: Any, job_id: str, timeout: float = 120) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    status: dict[str, Any] = status_doc(backend, job_id)
    while JobState(status["state"]) not in TERMINAL and time.monotonic() < deadline:
        time.sleep(0.3)
        status = status_doc(backend, job_id)
    return status


def test_stop_meter_tells_the_user_and_runs_nothing(sshd_server: SshServer, tmp_path: Path) -> None:
    backend = get_backend(register(sshd_server, "adl", tmp_path / "root", profile="autodl"))
    before = sorted(p.name for p in (tmp_path / "root").rglob("*"))
    text = backend.stop_meter()
    assert "cannot stop the meter of adl over SSH" in text
    assert "关机" in text and "console" in text
    assert sorted(p.name for p in (tmp_path / "root").rglob("*")) == before


def test_code_push_lands_in_an_immutable_snapshot(sshd_server: SshServer, tmp_path: Path) -> None:
    project = tmp_path / "proj $(touch PWNED)"
    (project / "pkg").mkdir(parents=True)
    (project / "train.py").write_text("print('v1')\n")
    (project / "pkg" / "run.sh").write_bytes(b"#!/bin/bash\r\necho hi\r\n")
    (project / "pkg" / "run.sh").chmod(0o755)
    (project / "big.ckpt").write_bytes(b"weights")
    (project / ".rgtignore").write_text("*.ckpt\n")
    register(sshd_server, "box", tmp_path / "root")
    first = rgt("push", "box", "--json", cwd=project)
    assert first.returncode == 0, first.stderr
    doc = json.loads(first.stdout)
    assert "CRLF" in first.stderr and doc["crlf_scripts"] == ["pkg/run.sh"]
    remote = Path(doc["remote"])
    assert remote == tmp_path / "root/.rgt/code" / doc["snapshot"]
    assert sorted(f["path"] for f in doc["files"]) == [".rgtignore", "pkg/run.sh", "train.py"]
    assert (remote / "pkg/run.sh").stat().st_mode & 0o777 == 0o555
    assert (remote / "train.py").stat().st_mode & 0o222 == 0
    again = json.loads(rgt("push", "box", "--json", cwd=project).stdout)
    assert again["remote"] == doc["remote"]
    (project / "train.py").write_text("print('v2')\n")
    changed = json.loads(rgt("push", "box", "--json", cwd=project).stdout)
    assert changed["snapshot"] != doc["snapshot"]
    assert (remote / "train.py").read_text() == "print('v1')\n"  # the old snapshot is intact
    assert no_pwned(tmp_path)


@pytest.mark.parametrize(
    ("profile", "words"),
    [("slurm", "not a machine reached over SSH"), ("no-such-profile", "no-such-profile")],
)
def test_up_refuses_profiles_that_are_not_ssh(profile: str, words: str) -> None:
    from rgt.backends.ssh import register_ssh
    from rgt.errors import UsageError

    with pytest.raises(UsageError) as info:
        register_ssh(Store.open(), profile, "box", ssh_line="ssh root@127.0.0.1")
    assert words in info.value.message and info.value.fix


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("~", "/home/u"),
        ("~/data", "/home/u/data"),
        ("data/x/", "/home/u/data/x"),
        ("/root/autodl-tmp", "/root/autodl-tmp"),
    ],
)
def test_durable_root_is_absolute_on_the_machine(given: str, expected: str) -> None:
    from rgt.backends.ssh import _absolute

    assert _absolute(given, "/home/u") == expected
