"""Benchmark of `rgt mcp`, side by side with the same tools served by the official MCP SDK.

1. Start-up: from spawning the server to the answer of the first `tools/list` (after
   `initialize`), a fresh server each repeat, over raw pipes. Goal <= 0.5 s. Beside it: the same
   tools served by the SDK's `MCPServer` (what `rgt mcp` was before it spoke the protocol
   itself), and the CPU seconds of each start-up (what other work on the machine cannot inflate).
2. A `status` tool call with 50 jobs on a local machine (real jobs, launched through the `run`
   tool, all ended), driven by the SDK's own client, beside the SDK server's and beside
   `rgt status --json` as a fresh process. Goal <= 0.2 s (median of the repeats).
3. Token thrift: the size of the `status` and `watch --once` documents for those 50 jobs, as the
   CLI prints them (`--json`, indented) and as the MCP tools return them.

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

from mcp.client.stdio import StdioServerParameters  # noqa: E402
from tests.mcp.client import McpRgt  # noqa: E402  (the SDK's client, as the tests drive it)

JOBS = 50
RGT = ["-m", "rgt.cli", "mcp"]
SDK_SERVER = """
import sys
from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations
from rgt.mcp.server import TOOLS, INSTRUCTIONS
server = MCPServer(name="rgt", instructions=INSTRUCTIONS, log_level="WARNING")
for fn, kind in TOOLS.items():
    server.add_tool(fn, annotations=ToolAnnotations(read_only_hint=kind.read_only,
        destructive_hint=kind.destructive, idempotent_hint=kind.idempotent))
server.run("stdio")
"""
SDK = ["-c", SDK_SERVER]
HELLO = [
    {"jsonrpc": "2.0", "id": 1, "method": "initialize",
     "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "bench", "version": "1"}}},
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
]  # fmt: skip


def env(home: Path) -> dict[str, str]:
    return {**os.environ, "RGT_HOME": str(home), "PYTHONPATH": str(ROOT / "src")}


def startup(home: Path, args: list[str]) -> tuple[float, float]:
    """Seconds from spawn to the `tools/list` answer, and the server's CPU seconds by then
    (user + sys, read when it exits on the end of stdin)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env(home)
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(b"".join(json.dumps(m).encode() + b"\n" for m in HELLO))
    proc.stdin.flush()
    proc.stdout.readline()
    tools = json.loads(proc.stdout.readline())["result"]["tools"]
    took = time.perf_counter() - began
    proc.stdin.close()
    proc.wait(60)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert len(tools) == 25
    return took, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def client(home: Path, cwd: Path, args: list[str]) -> McpRgt:
    server = McpRgt(home, cwd)
    server.params = StdioServerParameters(
        command=sys.executable, args=args, env=env(home), cwd=str(cwd)
    )
    server.start()
    return server


def fill(server: McpRgt, root: Path) -> None:
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


def timed_status(server: McpRgt, repeat: int) -> list[float]:
    server.call("status")  # the first call loads the command's modules
    times = []
    for _ in range(repeat):
        began = time.perf_counter()
        answer = server.call("status")
        times.append(time.perf_counter() - began)
        assert not answer.is_error and len(answer.data["jobs"]) == JOBS, answer.text[:300]
    return times


def cli_status(home: Path, repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        began = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "rgt.cli", "status", "--json"],
            capture_output=True, env=env(home), timeout=120, check=True,
        )  # fmt: skip
        times.append(time.perf_counter() - began)
    return times


def cli_bytes(home: Path, *args: str) -> int:
    proc = subprocess.run(
        [sys.executable, "-m", "rgt.cli", *args, "--json"],
        capture_output=True, env=env(home), timeout=120, check=True,
    )  # fmt: skip
    return len(proc.stdout)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        home = root / "home"
        starts = {
            "rgt mcp": [startup(home, RGT) for _ in range(args.repeat)],
            "SDK MCPServer": [startup(home, SDK) for _ in range(args.repeat)],
        }
        server = client(home, root, RGT)
        fill(server, root)
        calls = {"rgt mcp": timed_status(server, args.repeat * 2)}
        sizes = {
            "status --json": cli_bytes(home, "status"),
            "watch --once --json": cli_bytes(home, "watch", "--once", "--no-gpu"),
            "status tool (compact JSON)": len(server.call("status").text.encode()),
            "watch tool (summary)": len(server.call("watch").text.encode()),
            "watch tool (full=true)": len(server.call("watch", {"full": True}).text.encode()),
        }
        server.stop()
        sdk = client(home, root, SDK)
        calls["SDK MCPServer"] = timed_status(sdk, args.repeat * 2)
        sdk.stop()
        calls["rgt status --json (a fresh process)"] = cli_status(home, args.repeat)
    report(starts, calls, sizes)


def report(
    starts: dict[str, list[tuple[float, float]]],
    calls: dict[str, list[float]],
    sizes: dict[str, int],
) -> None:
    base = statistics.median(t for t, _ in starts["rgt mcp"])
    print("start-up to the first tools/list answer (goal <= 0.5 s):")
    for name, runs in starts.items():
        wall = statistics.median(t for t, _ in runs)
        cpu = statistics.median(c for _, c in runs)
        print(f"  {name:14s} median {wall:.2f} s (CPU {cpu:.2f} s)  x{wall / base:.1f}")
    print(f"status with {JOBS} jobs (goal <= 200 ms):")
    mine = statistics.median(calls["rgt mcp"])
    for name, times in calls.items():
        median = statistics.median(times)
        print(f"  {name:36s} median {median * 1000:5.0f} ms  x{median / mine:.1f}")
    for name, size in sizes.items():
        print(f"{name}, {JOBS} jobs: {size / 1024:.1f} KiB")
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    print(json.dumps({"python": sys.version.split()[0]}))


if __name__ == "__main__":
    main()
