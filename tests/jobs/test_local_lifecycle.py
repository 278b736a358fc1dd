"""The verbs end to end on the local backend, through the real CLI, agent and files."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.clirun import rgt
from tests.ttys import PtyRgt, approve_at_a_terminal

JOB = """
import json, os, pathlib, sys, time
time.sleep(float(sys.argv[1]) if len(sys.argv) > 1 else 0)
out = pathlib.Path(os.environ["RGT_OUTPUT_DIR"])
config = pathlib.Path("config.txt").read_text()
token = os.environ.get("TOKEN", "")
(out / "result.json").write_text(json.dumps({"config": config, "has_token": bool(token),
                                             "token_len": len(token)}))
print("finished", flush=True)
"""


# One directory name with every character that breaks naive quoting, so each test covers all.
HOSTILE = "dir 'q' \"d\" ü $(touch PWNED); x"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    proj = tmp_path / HOSTILE / "proj"
    proj.mkdir(parents=True)
    (proj / "job.py").write_text(JOB)
    (proj / "config.txt").write_text("original")
    return proj


@pytest.fixture
def machine(tmp_path: Path) -> str:
    proc = rgt("up", "local", "--name", "box", "--root", str(tmp_path / HOSTILE / "root"))
    assert proc.returncode == 0, proc.stderr
    return "box"


def _launch(project: Path, *args: str, env: dict[str, str] | None = None) -> dict[str, str]:
    proc = rgt(
        "run",
        "box",
        "--probe-seconds",
        "1",
        "--json",
        *args,
        "--",
        sys.executable,
        "job.py",
        cwd=project,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    doc: dict[str, str] = json.loads(proc.stdout)
    return doc


@pytest.mark.slow
def test_run_watch_pull_approve_down(project: Path, machine: str, tmp_path: Path) -> None:
    doc = _launch(project, "--secret", "TOKEN", env={"TOKEN": "s3cr3t-value"})
    assert doc["machine"] == "box" and doc["state"] in ("running", "succeeded")
    watched = rgt("watch", doc["job_id"], "--interval", "0.3", "--json")
    assert watched.returncode == 0, watched.stderr
    assert json.loads(watched.stdout)["state"] == "succeeded"
    refused = rgt("down", "box", "--json")
    assert refused.returncode == 3
    assert "not pulled" in refused.stdout
    pulled = rgt("pull", doc["job_id"], "--to", str(tmp_path / "pulled"), "--json")
    assert pulled.returncode == 0, pulled.stderr
    result = json.loads((tmp_path / "pulled" / "outputs" / "result.json").read_text())
    assert result == {"config": "original", "has_token": True, "token_len": 12}
    _assert_secret_nowhere(Path(os.environ["RGT_HOME"]), tmp_path, secret=b"s3cr3t-value")
    still = rgt("down", "box", "--yes", "--json")  # --yes without a terminal approves nothing
    assert still.returncode == 3
    assert [c["name"] for c in json.loads(still.stdout)["verdict"]["checks"] if not c["ok"]] == [
        "approved"
    ]
    _approve_at_a_terminal("box")
    released = rgt("down", "box", "--json")
    assert released.returncode == 0, released.stderr
    assert json.loads(released.stdout)["released"] is True


def _assert_secret_nowhere(*roots: Path, secret: bytes) -> None:
    for root in roots:
        for path in root.rglob("*"):
            if path.is_file() and not path.is_symlink():
                assert secret not in path.read_bytes(), f"secret leaked into {path}"


def _approve_at_a_terminal(name: str, *extra: str) -> None:
    """A real pseudo-terminal as the controlling terminal: what a human at a terminal has."""
    assert approve_at_a_terminal(name, *extra) == 0


@pytest.mark.slow
def test_approval_refused_without_terminal(machine: str) -> None:
    proc = rgt("approve", machine, "--json")
    assert proc.returncode == 3
    assert "terminal" in json.loads(proc.stdout)["message"]


@pytest.mark.slow
def test_job_survives_the_cli_and_reads_its_snapshot(project: Path, machine: str) -> None:
    cli = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "rgt.cli",
            "run",
            "box",
            "--probe-seconds",
            "60",
            "--json",
            "--",
            sys.executable,
            "job.py",
            "3",
        ],
        cwd=project,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    job_id = _wait_for_job_id()
    cli.send_signal(signal.SIGKILL)
    cli.wait(timeout=30)
    (project / "config.txt").write_text("edited after launch")
    watched = rgt("watch", job_id, "--interval", "0.3", "--json")
    assert json.loads(watched.stdout)["state"] == "succeeded", watched.stdout
    pulled = rgt("pull", job_id, "--json", cwd=project)
    assert pulled.returncode == 0, pulled.stderr
    dest = Path(json.loads(pulled.stdout)["dest"])
    assert dest == project / "rgt-pulls" / job_id
    assert json.loads((dest / "outputs" / "result.json").read_text())["config"] == "original"


def _wait_for_job_id(timeout: float = 60) -> str:
    """The id of the job once its agent runs it (the CLI is then still probing)."""
    from rgt.backends import backend_for
    from rgt.models import JobState
    from rgt.state.store import Store

    store = Store.open()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        jobs = store.jobs("box")
        read = backend_for(store, "box").read_jobs([j.job_id for j in jobs[:1]])
        if jobs and read.job(jobs[0].job_id).state is JobState.RUNNING:
            return jobs[0].job_id
        time.sleep(0.1)
    raise AssertionError("the job never started running")


@pytest.mark.slow
def test_a_failing_job_fails_fast_and_is_not_retried(project: Path, machine: str) -> None:
    (project / "bad.py").write_text("import nonexistent_module_xyz\n")
    proc = rgt(
        "run", "box", "--probe-seconds", "30", "--json", "--", sys.executable, "bad.py", cwd=project
    )
    doc = json.loads(proc.stdout)
    assert proc.returncode == 1 and doc["state"] == "failed" and doc["traceback"]
    status = json.loads(rgt("status", doc["job_id"], "--json").stdout)
    assert status["jobs"][0]["attempt"] == 1
    assert status["jobs"][0]["label"] == "import_error"
    triaged = rgt("triage", doc["job_id"], "--json")
    assert triaged.returncode == 0, triaged.stderr
    verdict = json.loads(triaged.stdout)
    assert verdict["label"] == "import_error" and verdict["retryable"] is False
    assert any("nonexistent_module_xyz" in line for line in verdict["evidence"])


@pytest.mark.slow
def test_cancel(project: Path, machine: str) -> None:
    doc = _launch(project)
    long_job = _launch(project)  # noqa: F841 - a second job on the same machine is fine
    (project / "sleep.py").write_text("import time\ntime.sleep(300)\n")
    proc = rgt(
        "run",
        "box",
        "--probe-seconds",
        "1",
        "--json",
        "--",
        sys.executable,
        "sleep.py",
        cwd=project,
    )
    sleeper = json.loads(proc.stdout)["job_id"]
    assert rgt("cancel", sleeper, "--json").returncode == 0
    watched = rgt("watch", sleeper, "--interval", "0.3", "--json")
    assert watched.returncode == 1
    assert json.loads(watched.stdout)["state"] == "cancelled"
    assert rgt("watch", doc["job_id"], "--json").returncode == 0


@pytest.mark.slow
def test_a_human_can_abandon_artifacts_that_never_verify(
    project: Path, machine: str, tmp_path: Path
) -> None:
    broken = (
        "import os, pathlib\npathlib.Path(os.environ['RGT_OUTPUT_DIR'], 'x.json')"
        ".write_text('{broken')\n"
    )
    (project / "broken.py").write_text(broken)
    proc = rgt(
        "run",
        "box",
        "--probe-seconds",
        "30",
        "--json",
        "--",
        sys.executable,
        "broken.py",
        cwd=project,
    )
    job_id = json.loads(proc.stdout)["job_id"]
    assert rgt("watch", job_id, "--json").returncode == 0
    assert rgt("pull", job_id, "--to", str(tmp_path / "p"), "--json").returncode == 1
    _approve_at_a_terminal("box")
    refused = json.loads(rgt("down", "box", "--json").stdout)
    assert [c["name"] for c in refused["verdict"]["checks"] if not c["ok"]] == ["verified"]
    # The fix names the real machine, never a placeholder.
    assert f"rgt approve box --abandon {job_id}" in " ".join(refused["verdict"]["reasons"])
    prompt = PtyRgt("approve", "box", "--abandon", job_id)
    prompt.expect("Type box to approve")
    prompt.type("box")
    assert prompt.wait() == 0
    said = prompt.seen.decode("utf-8", "replace")
    assert "were pulled to" in said and "(not lost)" in said and "x.json" in said, said
    assert "will NOT be pulled" not in said
    released = rgt("down", "box", "--json")
    assert released.returncode == 0, released.stderr
    gate = json.loads(released.stdout)["gate"]
    row = gate["jobs"][0]
    assert row["abandoned_by"] and row["job"] == job_id
    details = {c["name"]: c["detail"] for c in gate["checks"]}
    assert details["verified"] == "0 verified, 1 abandoned", details
