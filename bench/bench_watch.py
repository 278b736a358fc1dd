"""Benchmark of `rgt watch` on the local backend.

1. Death to event: a job is killed (SIGKILL of its process group, no traceback); we time from
   the kill to the first `rgt watch JOB --once --json` (a fresh CLI process each try, as a
   cron patrol would run it) whose job shows the classified end (state retrying/failed with a
   triage label). Goal <= 5 s.
2. Patrol of 8 machines: 8 local machines with one running job each; time of
   `rgt watch --once --json` (CLI start + 8 agent round trips in parallel). Goal <= 2 s.
3. Sizes (#16): 50 running jobs on 5 local machines; the bytes of `rgt status --json` and
   `rgt watch --once --json` (the compact default) beside their `--full` form. Goal: a few KB.

Run: .venv/bin/python bench/bench_watch.py [--repeat N] [--sizes-only]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

JOB = "import time\nprint('step 1 loss 0.5', flush=True)\ntime.sleep(600)\n"
# Part 3's jobs run until told to end (a `go` file in their outputs), then exit 0.
WAIT_GO = """import os, time
print('step 1 loss 0.5', flush=True)
go = os.path.join(os.environ["RGT_OUTPUT_DIR"], "go")
while not os.path.exists(go):
    time.sleep(0.5)
"""


def rgt(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rgt.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
        check=False,
    )


def launch(machine: str, proj: Path) -> str:
    proc = rgt(
        "run",
        machine,
        "--probe-seconds",
        "0",
        "--retries",
        "0",
        "--json",
        "--",
        sys.executable,
        "job.py",
        cwd=proj,
    )
    return str(json.loads(proc.stdout)["job_id"])


def wait_running(job_id: str) -> dict[str, object]:
    while True:
        job = json.loads(rgt("watch", job_id, "--once", "--json", "--no-gpu").stdout)
        if job["state"] == "running" and job.get("attempt"):
            return job
        time.sleep(0.1)


def death_to_event(proj: Path) -> float:
    job_id = launch("m0", proj)
    wait_running(job_id)
    pid = _status_pid(job_id)
    killed = time.monotonic()
    os.killpg(pid, signal.SIGKILL)
    while True:
        job = json.loads(rgt("watch", job_id, "--once", "--json", "--no-gpu").stdout)
        if job["state"] in ("failed", "retrying") and job.get("label"):
            return time.monotonic() - killed


def _status_pid(job_id: str) -> int:
    home = Path(os.environ["RGT_HOME"])
    status = next(home.glob(f"machines/*/.rgt/jobs/{job_id}/status.json"))
    return int(json.loads(status.read_text())["pid"])


CPU: list[float] = []


def patrol_time() -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    proc = rgt("watch", "--once", "--json", "--no-gpu")
    elapsed = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    report = json.loads(proc.stdout)
    assert len(report["machines"]) == 8 and all(m["reachable"] for m in report["machines"])
    return elapsed


SIZED = (("status", "--json"), ("watch", "--once", "--json", "--no-gpu"))


def sizes(proj: Path, machines: int = 5, per_machine: int = 10) -> None:
    """Bytes of the compact and the full documents for ``machines * per_machine`` jobs."""
    from rgt.backends import backend_for
    from rgt.jobs.launch import LaunchOptions
    from rgt.jobs.launch import launch as launch_job
    from rgt.state.store import Store

    store = Store.open()
    jobs = []
    for i in range(machines):
        rgt("up", "local", "--name", f"s{i}")
        options = LaunchOptions(command=(sys.executable, "wait_go.py"), cwd=proj)
        jobs += [launch_job(store, f"s{i}", options).job_id for _ in range(per_machine)]
    while True:  # one `rgt status` per look: it reads each machine's jobs in one call
        rows = json.loads(rgt("status", "--json").stdout)["jobs"]
        if sum(1 for r in rows if r["state"] == "running") == len(jobs):
            break
        time.sleep(1)
    try:
        for argv in SIZED:
            cut, full = len(rgt(*argv).stdout), len(rgt(*argv, "--full").stdout)
            print(f"rgt {' '.join(argv)} for {len(jobs)} jobs: compact {cut / 1024:.1f} KiB, "
                  f"--full {full / 1024:.1f} KiB ({full / cut:.0f}x smaller)")  # fmt: skip
    finally:
        for job_id in jobs:  # the jobs end on their own (no 50 cancels)
            record = store.job(job_id)
            out = Path(backend_for(store, record.machine).job_paths(job_id).output_dir)
            (out / "go").write_text("")
        while "running" in {r["state"] for r in json.loads(rgt("status", "--json").stdout)["jobs"]}:
            time.sleep(1)  # every agent has finished writing before the directory goes


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--sizes-only", action="store_true", help="only part 3")
    args = parser.parse_args()
    if args.sizes_only:
        with tempfile.TemporaryDirectory(prefix="rgt-bench-watch-") as tmp:
            os.environ["RGT_HOME"] = str(Path(tmp) / "home")
            proj = Path(tmp) / "proj"
            proj.mkdir()
            (proj / "wait_go.py").write_text(WAIT_GO)
            sizes(proj)
        return
    with tempfile.TemporaryDirectory(prefix="rgt-bench-watch-") as tmp:
        os.environ["RGT_HOME"] = str(Path(tmp) / "home")
        proj = Path(tmp) / "proj"
        proj.mkdir()
        (proj / "job.py").write_text(JOB)
        for i in range(8):
            rgt("up", "local", "--name", f"m{i}")
        deaths = [death_to_event(proj) for _ in range(args.repeat)]
        jobs = [launch(f"m{i}", proj) for i in range(8)]
        for job_id in jobs:
            wait_running(job_id)
        patrols = [patrol_time() for _ in range(args.repeat)]
        for job_id in jobs:
            rgt("cancel", job_id)
        (proj / "wait_go.py").write_text(WAIT_GO)
        sizes(proj)
    for name, values, goal in (
        ("death -> classified event in watch --once", deaths, 5.0),
        ("patrol of 8 local machines (watch --once)", patrols, 2.0),
    ):
        print(
            f"{name}: median {statistics.median(values):.2f} s, max {max(values):.2f} s "
            f"over {len(values)} runs (goal <= {goal:g} s)"
        )
    print(f"patrol CPU time (CLI + 8 agents, user+sys): median {statistics.median(CPU):.2f} s")
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
