"""The whole lifecycle over MCP, driven by the SDK's own client against `rgt mcp` on the local
backend: up → smoke → run → watch → triage of a failed job → pull → verify compare → deliver
record → down refused (approval_required) → a human approves at a real terminal → down
releases. The machine is never released before the terminal approval."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.mcp.client import SRC, McpRgt
from tests.ttys import PtyRgt

# A tiny training loop on rgt.ckpt that resumes exactly (numpy weights: pull load-verifies
# them) and records three seeds of one variant as results.json run directories.
TRAIN = """
import os
import numpy as np
from rgt.ckpt import Checkpointer
from rgt.results import write_results
lift = float(os.environ.get("LIFT", "0"))
ckpt = Checkpointer.from_env(every_steps=1)
state = ckpt.load_latest()
step, weight = (state["step"], state["weight"]) if state else (0, np.zeros(4))
while step < 2:
    step += 1
    weight = weight + 0.5
    print(f"step {step} loss {1 / step}", flush=True)
    if ckpt.due(step):
        ckpt.save({"step": step, "weight": weight}, step=step)
name = "lift" if lift else "base"
for seed in range(3):  # three seeds of one variant, each its own run directory
    run = os.path.join("runs", f"{name}-s{seed}")
    os.makedirs(run, exist_ok=True)
    write_results(run, {"name": name, "seed": seed, "steps": step, "config": {"lift": lift},
                        "metrics": {"accuracy": 0.8 + lift + 0.003 * seed}})
"""
# A job that floods its log and then fails on an import: a bounded tail, a fixed label.
FAIL = """
import sys, time
time.sleep(3)  # fail after run's 1 s probe, whatever the machine's load
for i in range(20000):
    print(f"noise line {i} " + "x" * 60)
sys.stdout.flush()
import definitely_not_installed_xyz
"""


@pytest.fixture
def world(mcp_server: tuple[McpRgt, Path]) -> tuple[McpRgt, Path]:
    server, root = mcp_server
    (root / "project" / "train.py").write_text(TRAIN)
    (root / "project" / "fail.py").write_text(FAIL)
    return server, root


def ok(server: McpRgt, tool: str, timeout: float = 300, **arguments: Any) -> dict[str, Any]:
    answer = server.call(tool, arguments, timeout)
    assert not answer.is_error, f"{tool}: {answer.text}"
    return answer.data


def approvals(home: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(home / "state.db") as conn:
        return list(conn.execute("SELECT machine, action FROM approvals"))


def cli_json(home: Path, *args: str) -> Any:
    env = {**os.environ, "RGT_HOME": str(home), "PYTHONPATH": SRC}
    proc = subprocess.run(
        [sys.executable, "-m", "rgt.cli", *args, "--json"],
        capture_output=True,
        text=True,
        env=env,
        stdin=subprocess.DEVNULL,
        timeout=120,
    )
    return json.loads(proc.stdout)


@pytest.mark.slow
def test_the_lifecycle_over_mcp_and_a_human_approval(world: tuple[McpRgt, Path]) -> None:
    server, root = world
    home, py = root / "home", sys.executable
    ok(server, "up", profile="local", name="box", root=str(root / "durable"))
    smoked = ok(server, "smoke", command=[py, "train.py"])
    assert smoked["ok"] and smoked["exact_resume"] is True

    base = _run_to_end(server, [py, "train.py"], {})
    lift = _run_to_end(server, [py, "train.py"], {"LIFT": "0.02"})
    failed = ok(server, "run", machine="box", command=[py, "fail.py"], retries=0, probe_seconds=1)
    assert ok(server, "watch", target=failed["job_id"], wait_s=120)["state"] == "failed"

    verdict = ok(server, "triage", target=failed["job_id"])
    assert verdict["label"] == "import_error" and verdict["retryable"] is False
    log = ok(server, "logs", job_id=failed["job_id"], lines=100000)
    assert log["truncated"] and len(log["tail"]) <= 8000
    assert "definitely_not_installed_xyz" in log["tail"]
    assert log["triage"]["label"] == "import_error"

    pulled = {}
    for job_id in (base, lift, failed["job_id"]):
        pulled[job_id] = ok(server, "pull", job_id=job_id, to=str(root / "pulls" / job_id))
    assert all(p["ok"] for p in pulled.values())
    _watch_is_thrifty(server)

    a, b = str(root / "pulls" / base), str(root / "pulls" / lift)
    compared = ok(server, "verify_compare", a=a, b=b, metric="accuracy")
    assert compared["verdict"] == "effect" and compared["n_a"] == compared["n_b"] == 3
    assert compared == cli_json(home, "verify", "compare", a, b, "--metric", "accuracy")

    ws = str(root / "delivery")
    ok(server, "deliver_init", directory=ws)
    runs = [f"{a}/work/runs/base-s0", f"{b}/work/runs/lift-s0"]
    recorded = ok(server, "deliver_record", run_dirs=runs, workspace=ws)
    assert len(recorded["runs"]) == 2 and all(r["created"] for r in recorded["runs"])

    refused = ok(server, "down", name="box")
    assert refused["status"] == "approval_required" and refused["released"] is False
    assert refused["human_command"] == "rgt approve box"
    assert approvals(home) == []  # nothing over MCP created an approval
    machines = {m["name"]: m for m in cli_json(home, "status")["machines"]}
    assert machines["box"].get("released") is None  # compact: a null is left out

    human = PtyRgt("approve", "box", "--no-pin", env={"RGT_HOME": str(home), "PYTHONPATH": SRC})
    human.expect("Type box to approve")
    human.type("box")
    assert human.wait() == 0

    released = ok(server, "down", name="box")
    assert released["released"] is True and released["gate"]["ok"] is True
    after = server.call("status")
    assert not after.is_error, (after.text, sorted(p.name for p in home.iterdir()))


def _run_to_end(server: McpRgt, command: list[str], env: dict[str, str]) -> str:
    """Launch, then wait with `watch` (bounded), and return the succeeded job's id."""
    started = ok(server, "run", machine="box", command=command, env=env, probe_seconds=1)
    ended = ok(server, "watch", target=started["job_id"], wait_s=120, interval_s=1)
    assert ended["state"] == "succeeded", ended
    return str(started["job_id"])


def _watch_is_thrifty(server: McpRgt) -> None:
    """Over every job, `watch` returns the patrol report cut to the fields an agent acts on:
    the same values under the same names, a fraction of the bytes of `full=true`."""
    cut, full = server.call("watch"), server.call("watch", {"full": True})
    assert not cut.is_error and not full.is_error
    assert len(cut.data["jobs"]) >= 3 and len(cut.text) * 3 < len(full.text)
    whole = {j["job_id"]: j for j in full.data["jobs"]}
    for job in cut.data["jobs"]:
        same = {k: v for k, v in job.items() if k != "next"}  # `next`: the fix, in one line
        assert same == {k: whole[job["job_id"]][k] for k in same}
