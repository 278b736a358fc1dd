"""Three `rgt run` of the same code at once on one machine: each stages the snapshot in its own
place, so none fails on another's half-copied files; the snapshot ends complete and unchanged."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.jobs.test_local_lifecycle import rgt
from tests.sshd import SshServer

# Enough files that three copies overlap in time.
FILES = 400


def _project(root: Path) -> Path:
    proj = root / "proj ü"
    (proj / "pkg").mkdir(parents=True)
    for i in range(FILES):
        (proj / "pkg" / f"m{i:03d}.py").write_text(f"VALUE = {i}\n" + "# pad\n" * 200)
    (proj / "job.py").write_text("import pkg.m399 as m\nprint('value', m.VALUE, flush=True)\n")
    return proj


def _launch_three(proj: Path, machine: str) -> list[subprocess.CompletedProcess[str]]:
    argv = [sys.executable, "-m", "rgt.cli", "run", machine, "--probe-seconds", "20", "--json"]
    procs = [
        subprocess.Popen(
            [*argv, "--", sys.executable, "job.py"],
            cwd=proj,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    done = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        done.append(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    return done


def _check(results: list[subprocess.CompletedProcess[str]], code_dir: Path) -> None:
    for result in results:
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout)["state"] == "succeeded"
    snapshots = [p.name for p in code_dir.iterdir()]
    assert len(snapshots) == 1, snapshots  # one complete snapshot, no staging left behind
    assert len(list((code_dir / snapshots[0] / "pkg").glob("*.py"))) == FILES


@pytest.mark.slow
def test_three_concurrent_runs_on_the_local_backend(tmp_path: Path) -> None:
    root = tmp_path / "root"
    assert rgt("up", "local", "--name", "box", "--root", str(root)).returncode == 0
    _check(_launch_three(_project(tmp_path), "box"), root / ".rgt" / "code")


@pytest.mark.slow
def test_three_concurrent_runs_over_ssh(tmp_path: Path, sshd_server: SshServer) -> None:
    root = tmp_path / "remote root"
    up = rgt(
        "up", "generic-ssh", "--name", "gpu", "--ssh", sshd_server.ssh_line, "--root", str(root)
    )
    assert up.returncode == 0, up.stderr
    _check(_launch_three(_project(tmp_path), "gpu"), root / ".rgt" / "code")
