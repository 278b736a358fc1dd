"""RunPod end to end through the real CLI: `up` rents from the fake (which hands out a real
sshd), `run`, `watch`, `pull`, a human approves at a terminal, `down` terminates and polls
until the fake really forgot the pod. A planted API key appears in no file rgt wrote."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests import clirun
from tests.clirun import ok
from tests.jobs.test_local_lifecycle import _approve_at_a_terminal
from tests.sshd import SshServer
from tests.vendors.fakes._server import FakeVendor

PLANTED = "rpa_PLANTED_7f3a9c2e1d0b4a5f"
JOB = """
import json, os, pathlib
out = pathlib.Path(os.environ["RGT_OUTPUT_DIR"])
(out / "result.json").write_text(json.dumps({"ok": True}))
print("step 1 loss 0.5", flush=True)
"""


def rgt(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    proc = clirun.rgt(*args, cwd=cwd, timeout=240)
    assert PLANTED not in proc.stdout + proc.stderr, f"the API key was printed by {args}"
    return proc


@pytest.mark.slow
def test_up_run_pull_approve_down_on_runpod(
    fake_for: Callable[..., FakeVendor],
    sshd_server: SshServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RGT_VENDOR_POLL_S", "0.1")
    monkeypatch.setenv("RGT_DEBUG", "1")  # the debug log of every request must not carry it
    fake = fake_for(
        "runpod", ssh_host=sshd_server.address, ssh_port=sshd_server.port, gone_polls=3, key=PLANTED
    )
    root = tmp_path / "machine root"
    up = ok(
        rgt(
            "up",
            "runpod",
            "--name",
            "pod",
            "--gpu",
            "A100:1",
            "--ssh-key",
            str(sshd_server.client_key),
            "--root",
            str(root),
            "--budget",
            "1000",
            "--json",
        )
    )
    (pod_id,) = fake.instances
    assert up["price_per_hour"] == 1.64 and up["backend"] == "ssh"
    project = tmp_path / "proj"
    project.mkdir()
    (project / "job.py").write_text(JOB)
    job = ok(
        rgt("run", "pod", "--probe-seconds", "1", "--json", "--", "python3", "job.py", cwd=project)
    )
    assert ok(rgt("watch", str(job["job_id"]), "--json"))["state"] == "succeeded"
    money = ok(rgt("status", "--json"))["billing"]  # asks the vendor (a key is set)
    assert money["orphans"]["orphans"] == [] and money["budgets"][0]["machine"] == "pod"
    assert ok(rgt("watch", "--once", "--json"))["billing"]["costs"][0]["price_source"] == "vendor"
    assert rgt("down", "pod", "--json").returncode == 3  # not pulled: the pod keeps running
    assert fake.billed() and fake.count("DELETE", "/v1/pods") == 0
    assert ok(rgt("pull", str(job["job_id"]), "--to", str(tmp_path / "got"), "--json"))["ok"]
    _approve_at_a_terminal("pod")
    down = ok(rgt("down", "pod", "--json"))
    assert down["released"] is True and "confirms it is gone" in str(down["meter"])
    assert fake.billed() == [] and pod_id in fake.confirmed_at  # a 404 was seen, not just a 200
    assert fake.count("GET", f"/v1/pods/{pod_id}") >= 4  # polled through the lingering reads
    orphans = ok(rgt("machines", "--orphans", "--json"))
    assert orphans["orphans"] == []
    _assert_nowhere(PLANTED.encode(), Path(os.environ["RGT_HOME"]), root, tmp_path / "got")


def _assert_nowhere(secret: bytes, *roots: Path) -> None:
    checked = 0
    for top in roots:
        for path in top.rglob("*"):
            if path.is_file() and not path.is_symlink():
                checked += 1
                assert secret not in path.read_bytes(), f"the API key leaked into {path}"
    assert checked > 5  # the state DB, known_hosts, the agent, the job's files were read
