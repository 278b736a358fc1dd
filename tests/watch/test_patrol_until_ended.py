"""`rgt watch --every … --until-ended`: an agent's periodic patrol, through the real CLI, agent
and jobs on the local backend; each round's report stays bounded however many jobs there are
and whatever a machine writes."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from rgt.watch.rounds import EVENTS, FIELD_CHARS, JOB_LINES, ROUND_BYTES, round_lines, round_report
from tests.clirun import rgt

JOB = """
import os, sys, time
out = os.environ["RGT_OUTPUT_DIR"]
while not os.path.exists(os.path.join(out, "go")):
    time.sleep(0.05)
print("done", flush=True)
sys.exit(int(sys.argv[1]))
"""


def _start(proj: Path, code: int) -> str:
    proc = rgt("run", "box", "--probe-seconds", "0", "--json", "--", sys.executable, "job.py",
               str(code), cwd=proj)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return str(json.loads(proc.stdout)["job_id"])


def _patrol(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "rgt.cli", "watch", *args, "--every", "1s", "--until-ended"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
    )  # fmt: skip


def _rounds(proc: subprocess.Popen[str], go: list[Path]) -> tuple[int, list[dict[str, Any]]]:
    """Let the patrol report a round or two with the jobs running, then end them."""
    assert proc.stdout is not None
    rounds = [json.loads(proc.stdout.readline())]
    assert rounds[0]["all_ended"] is False and rounds[0]["ok"] is None
    for path in go:
        path.write_text("")
    out, _err = proc.communicate(timeout=90)
    rounds += [json.loads(line) for line in out.splitlines()]
    return proc.wait(), rounds


@pytest.mark.slow
def test_the_patrol_reports_each_round_and_exits_when_every_job_has_ended(
    tmp_path: Path,
) -> None:
    root = tmp_path / "root"
    assert rgt("up", "local", "--name", "box", "--root", str(root)).returncode == 0
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "job.py").write_text(JOB)
    good, bad = _start(proj, 0), _start(proj, 3)
    go = {j: root / ".rgt" / "jobs" / j / "outputs" / "go" for j in (good, bad)}

    started = time.monotonic()
    code, rounds = _rounds(_patrol(good, "--json"), [go[good]])
    assert code == 0 and time.monotonic() - started < 60  # one job named: it alone decides
    assert [j["state"] for j in rounds[-1]["jobs"]] == ["succeeded"]
    assert rounds[-1]["all_ended"] and rounds[-1]["ok"]

    code, rounds = _rounds(_patrol("--json"), [go[bad]])
    assert code == 1, "a failed job makes the patrol exit 1"
    last = rounds[-1]
    assert last["all_ended"] and last["ok"] is False
    assert {j["job_id"]: j["state"] for j in last["jobs"]} == {good: "succeeded", bad: "failed"}
    assert [r["round"] for r in rounds] == list(range(1, len(rounds) + 1))
    for doc in rounds:
        assert len(json.dumps(doc)) <= ROUND_BYTES and doc["schema"] == "rgt.watch.round/1"

    human = rgt("watch", "--every", "1s", "--until-ended")
    assert human.returncode == 1
    assert human.stdout.startswith("round 1 at ") and f"  {bad}: failed" in human.stdout


def test_a_round_is_bounded_whatever_the_jobs_and_the_machine_say() -> None:
    flood = "call down NOW \x1b[2J " * 5000
    jobs = [
        {"job_id": f"j{i:03d}", "machine": "box", "state": "running", "attempt": 1,
         "reason": flood, "next": flood, "alerts": ["gpu_idle"] * 50, "label": None}
        for i in range(200)
    ] + [{"job_id": "z-failed", "machine": "box", "state": "failed", "attempt": 2,
          "label": "cuda_oom", "reason": flood}]  # fmt: skip
    events = [{"time": "t", "job_id": "j000", "kind": "gpu_idle", "next": flood}] * 100
    report = {"time": "now", "jobs": jobs, "events": events, "machines": [],
              "summary": {"jobs": {"running": 200, "failed": 1}}}  # fmt: skip
    doc = round_report(report, 7)
    assert len(json.dumps(doc)) <= ROUND_BYTES
    assert len(doc["jobs"]) <= JOB_LINES and doc["jobs_left_out"] >= len(jobs) - JOB_LINES
    assert doc["jobs"][0]["job_id"] == "z-failed"  # what needs attention comes first
    assert doc["jobs"][0]["explain"] == "rgt explain cuda_oom"
    assert len(doc["events"]) <= EVENTS and doc["all_ended"] is False
    assert doc["events"][-1]["explain"] == "rgt explain gpu_idle"  # events link to their entry
    lines = round_lines(doc)
    assert len(lines) <= 1 + JOB_LINES + 2 + EVENTS
    assert all(len(line) <= 2 * FIELD_CHARS for line in lines)


def test_a_bad_duration_is_a_usage_error() -> None:
    proc = rgt("watch", "--every", "soon", "--until-ended", "--json")
    assert proc.returncode == 2 and "--every 10m" in json.loads(proc.stdout)["fix"]
