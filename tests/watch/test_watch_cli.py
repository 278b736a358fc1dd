"""`rgt watch`, `rgt audit`, `rgt reap` through the real CLI, agent and files on the local
backend, plus a machine that cannot be reached (an ssh machine on a closed port)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from rgt.models import JobSpec, JobState
from rgt.state.store import Store
from tests.clirun import rgt
from tests.sshd import add_unreachable

JOB = """
import json, os, time
out = os.environ["RGT_OUTPUT_DIR"]
with open(os.path.join(out, "metrics.jsonl"), "a") as m:
    for step, loss in ((10, 2.0), (20, 1.5)):
        m.write(json.dumps({"step": step, "loss": loss}) + "\\n")
print("step 20 loss 1.5", flush=True)
while not os.path.exists(os.path.join(out, "go")):
    time.sleep(0.05)
"""


# Every test runs its machine under one root whose name breaks naive quoting.
pytestmark = pytest.mark.parametrize("hostile_name", ["dir 'q' \"d\" ü $(touch PWNED); x"])


@pytest.fixture
def box(tmp_path: Path, hostile_name: str) -> Path:
    root = tmp_path / hostile_name / "root"
    assert rgt("up", "local", "--name", "box", "--root", str(root)).returncode == 0
    return root


@pytest.fixture
def running(tmp_path: Path, box: Path) -> str:
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "job.py").write_text(JOB)
    proc = rgt(
        "run", "box", "--probe-seconds", "0", "--json", "--", sys.executable, "job.py", cwd=proj
    )
    assert proc.returncode == 0, proc.stderr
    job_id: str = json.loads(proc.stdout)["job_id"]
    outputs = box / ".rgt" / "jobs" / job_id / "outputs"
    deadline = time.monotonic() + 30
    while not (outputs / "metrics.jsonl").exists():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    yield job_id
    (outputs / "go").write_text("")


@pytest.mark.slow
def test_watch_once_json_shape(running: str) -> None:
    proc = rgt("watch", "--once", "--json", "--full")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["schema"] == "rgt.watch/1"
    (machine,) = report["machines"]
    assert machine["name"] == "box" and machine["reachable"] and machine["error"] is None
    assert 0 <= machine["disk"]["bytes_pct"] <= 100 and machine["disk"]["inodes_pct"] is not None
    assert machine["cost_so_far"] is None and isinstance(machine["gpus"], list)
    (job,) = report["jobs"]
    assert job["job_id"] == running and job["state"] == "running" and job["attempt"] == 1
    assert (job["step"], job["loss"], job["progress_source"]) == (20, 1.5, "metrics.jsonl")
    assert job["agent_alive"] and job["heartbeat_age_s"] < 60 and job["alerts"] == []
    assert "attempt_started" in [e["kind"] for e in report["events"]]
    assert report["summary"]["jobs"] == {"running": 1}
    one = json.loads(rgt("watch", running, "--once", "--json", "--full").stdout)
    assert {"state", "job_id", "attempt", "events", "machine_report"} <= set(one)


@pytest.mark.slow
def test_compact_json_is_the_full_form_cut(running: str) -> None:
    """The default `--json` of `watch --once`, `watch JOB --once` and `status`: the full
    form's names and values, nulls and defaults left out, valid against the shipped schemas."""
    cut = json.loads(rgt("watch", "--once", "--json", "--no-gpu").stdout)
    full = json.loads(rgt("watch", "--once", "--json", "--full", "--no-gpu").stdout)
    schema("watch").validate(cut)
    (job,) = cut["jobs"]
    assert job == {
        "job_id": running,
        "machine": "box",
        "state": "running",
        "attempt": 1,
        "step": 20,
    }  # the reason "attempt 1 running" is the default: left out
    assert cut["machines"][0]["reachable"] is True and "disk" not in cut["machines"][0]
    assert len(json.dumps(cut)) * 3 < len(json.dumps(full))
    one = json.loads(rgt("watch", running, "--once", "--json").stdout)
    assert "machine_report" not in one and one["state"] == "running"
    assert {e["kind"] for e in one["events"]} >= {"attempt_started"}
    status = json.loads(rgt("status", "--json").stdout)
    schema("status", "status_report").validate(status)
    assert status["jobs"] == [job] and status["machines"] == [{"name": "box", "backend": "local"}]
    whole = json.loads(rgt("status", "--json", "--full").stdout)["jobs"][0]
    assert whole["agent_alive"] is True and whole["heartbeat_lost"] is None


def schema(name: str, part: str | None = None) -> Any:
    """The shipped schema ``name`` (or its ``$defs/part``), resolving refs between them."""
    from importlib import resources

    from jsonschema import Draft202012Validator
    from referencing import Registry, Resource

    def load(file: str) -> dict[str, Any]:
        text = resources.files("rgt").joinpath(f"schemas/{file}").read_text("utf-8")
        return dict(json.loads(text))

    files = ("status.schema.json", "watch.schema.json")
    registry = Registry().with_resources(
        (f"https://rgt.dev/schemas/{f}", Resource.from_contents(load(f))) for f in files
    )
    doc = load(f"{name}.schema.json")
    if part is not None:
        doc = {"$ref": f"https://rgt.dev/schemas/{name}.schema.json#/$defs/{part}"}
    return Draft202012Validator(doc, registry=registry)


@pytest.mark.slow
def test_following_a_job_to_its_end(running: str, box: Path) -> None:
    (box / ".rgt" / "jobs" / running / "outputs" / "go").write_text("")
    proc = rgt("watch", running, "--interval", "0.2", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["state"] == "succeeded"


def _unreachable_machine(tmp_path: Path) -> None:
    store = Store.open()
    add_unreachable(store, "gone", tmp_path / "known_hosts", price=1.5)
    spec = JobSpec(job_id="gone-job", machine="gone", command=("python3", "t.py"))
    store.add_job(spec)
    store.update_job("gone-job", state=JobState.RUNNING, attempts=2)


@pytest.mark.slow
def test_an_unreachable_machine_is_not_a_dead_job(running: str, tmp_path: Path) -> None:
    _unreachable_machine(tmp_path)
    first = json.loads(rgt("watch", "--once", "--json").stdout)
    rows = {m["name"]: m for m in first["machines"]}
    assert rows["box"]["reachable"] and not rows["gone"]["reachable"]
    assert rows["gone"]["unreachable_since"] and rows["gone"]["cost_so_far"] > 1.5 * 24 * 300
    jobs = {j["job_id"]: j for j in first["jobs"]}
    assert jobs["gone-job"]["state"] == "running" and jobs["gone-job"]["attempt"] == 2
    assert "unreachable" in jobs["gone-job"]["reason"] and jobs[running]["state"] == "running"
    second = json.loads(rgt("watch", "--once", "--json").stdout)
    again = {m["name"]: m for m in second["machines"]}["gone"]
    assert again["unreachable_since"] == rows["gone"]["unreachable_since"]
    assert Store.open().job("gone-job").state is JobState.RUNNING
    human = rgt("watch", "--once", env={"COLUMNS": "250"})
    assert "unreachable since" in human.stdout and human.returncode == 0


@pytest.mark.slow
def test_audit_reports_findings_with_fixes(box: Path) -> None:
    proc = rgt(
        "audit",
        "box",
        "--path",
        str(box),
        "--ckpt-gb",
        "1000000",
        "--json",
        env={"RGT_NVIDIA_SMI": "/nonexistent/nvidia-smi"},
    )
    assert proc.returncode == 1, proc.stderr
    data = json.loads(proc.stdout)
    checks = {f["check"]: f for f in data["findings"]}
    assert "no GPU visible" in checks["gpu"]["finding"] and checks["gpu"]["fix"]
    assert "bigger disk" in checks["checkpoint budget"]["fix"]
    assert data["readings"]["tiers"][0]["bytes_total"] > 0 and data["workers"]["suggested"] >= 0
    assert data["readings"]["memory"]["version"] in (1, 2, None)
    assert data["readings"]["python"]["version"].startswith("3.")


@pytest.mark.slow
def test_reap_lists_vram_holders_that_are_not_jobs(box: Path, tmp_path: Path) -> None:
    devices = tmp_path / "dev"
    devices.mkdir()
    (devices / "nvidia0").write_bytes(b"")
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; f = open(sys.argv[1]); time.sleep(120)",
            str(devices / "nvidia0"),
        ]
    )
    env = {"RGT_NVIDIA_DEVICES": str(devices / "nvidia[0-9]*"), "RGT_NVIDIA_SMI": "/nonexistent"}
    try:
        deadline = time.monotonic() + 20
        while True:
            listed = json.loads(rgt("reap", "box", "--json", env=env).stdout)
            if listed["suspects"] or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        (suspect,) = listed["suspects"]
        assert suspect["pid"] == holder.pid and suspect["why"] == "not started by rgt"
        refused = rgt("reap", "box", "--kill", "--json", env=env)
        assert refused.returncode == 3 and holder.poll() is None  # no terminal: nothing killed
        agent = [sys.executable, "-m", "rgt.agent", "reap", str(box / ".rgt")]
        done = subprocess.run(
            [*agent, "--kill", str(holder.pid), "--kill", "1"],
            capture_output=True,
            text=True,
            env={**os.environ, **env},
        )
        result = json.loads(done.stdout)
        assert [k["pid"] for k in result["killed"]] == [holder.pid] and holder.wait(10) != 0
        assert [r["pid"] for r in result["refused"]] == [1]
    finally:
        holder.kill()
        holder.wait()
