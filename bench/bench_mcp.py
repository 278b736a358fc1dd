"""Benchmark of `rgt mcp` driven by the MCP SDK's own stdio client.

1. Start-up: from spawning `rgt mcp` to the answer of the first `tools/list` (the client's
   `initialize` included), a fresh server each repeat. Goal <= 0.5 s.
2. A `status` tool call with 50 jobs on a local machine (real jobs, launched through the `run`
   tool, all ended). Goal <= 0.2 s (median of the repeats).
3. Token thrift: the size of the `status` and `watch --once` documents for those 50 jobs, as the
   CLI prints them (`--json`, indented) and as the MCP tools return them (compact JSON; `watch`
   cut to the fields an agent acts on unless `full`).

Run: .venv/bin/python bench/bench_mcp.py [--repeat N]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

from tests.mcp.client import McpRgt  # noqa: E402  (the SDK's client, as the tests drive it)

JOBS = 50


def startup(home: Path, cwd: Path) -> float:
    began = time.perf_counter()
    server = McpRgt(home, cwd)
    server.start()
    server.tools()
    took = time.perf_counter() - began
    server.stop()
    return took


def import_cpu_s() -> float:
    """CPU seconds (user + sys) of a fresh interpreter that imports the server and builds it:
    the part of the start-up that other work on the machine cannot inflate."""
    code = "from rgt.mcp.server import build; build()"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=120)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def fill(server: McpRgt, root: Path) -> list[str]:
    """50 short real jobs on one local machine, all ended."""
    server.call("up", {"profile": "local", "name": "bench", "root": str(root / "durable")})
    ids = []
    for _ in range(JOBS):
        answer = server.call(
            "run",
            {"machine": "bench", "command": [sys.executable, "-c", "print('ok')"],
             "probe_seconds": 0, "retries": 0},
        )  # fmt: skip
        ids.append(str(answer.data["job_id"]))
    for job_id in ids:
        server.call("watch", {"target": job_id, "wait_s": 60, "interval_s": 0.5})
    return ids


def timed_status(server: McpRgt, repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        began = time.perf_counter()
        answer = server.call("status")
        times.append(time.perf_counter() - began)
        assert not answer.is_error and len(answer.data["jobs"]) == JOBS
    return times


def cli_bytes(home: Path, *args: str) -> int:
    env = {**os.environ, "RGT_HOME": str(home), "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.run(
        [sys.executable, "-m", "rgt.cli", *args, "--json"],
        capture_output=True,
        env=env,
        timeout=120,
        check=True,
    )
    return len(proc.stdout)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        home = root / "home"
        starts = [startup(home, root) for _ in range(args.repeat)]
        cpu = [import_cpu_s() for _ in range(args.repeat)]
        server = McpRgt(home, root)
        server.start()
        fill(server, root)
        server.call("status")  # the first call imports the CLI; the agent is started warm
        status_times = timed_status(server, args.repeat * 2)
        sizes = {
            "status --json": cli_bytes(home, "status"),
            "watch --once --json": cli_bytes(home, "watch", "--once", "--no-gpu"),
            "status tool (compact JSON)": len(server.call("status").text.encode()),
            "watch tool (summary)": len(server.call("watch").text.encode()),
            "watch tool (full=true)": len(server.call("watch", {"full": True}).text.encode()),
        }
        server.stop()
    report(starts, cpu, status_times, sizes)


def report(
    starts: list[float], cpu: list[float], status_times: list[float], sizes: dict[str, int]
) -> None:
    print(
        f"start-up to first tools/list: median {statistics.median(starts):.2f} s, "
        f"min {min(starts):.2f} s over {len(starts)} runs (goal <= 0.5 s)"
    )
    print(f"CPU time to import and build the server: median {statistics.median(cpu):.2f} s")
    print(
        f"status tool call, {JOBS} jobs: median {statistics.median(status_times) * 1000:.0f} ms, "
        f"max {max(status_times) * 1000:.0f} ms over {len(status_times)} calls (goal <= 200 ms)"
    )
    for name, size in sizes.items():
        print(f"{name}, {JOBS} jobs: {size / 1024:.1f} KiB")
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    print(json.dumps({"python": sys.version.split()[0]}))


if __name__ == "__main__":
    main()
