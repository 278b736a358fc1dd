"""`rgt ui`'s first page (`/`) against `rgt status --json`, on the same state DB, in one run.

    .venv/bin/python bench/bench_ui_server.py [--machines 20] [--jobs 200] [--repeats 15]
        [--status-repeats 3]

A temporary RGT_HOME gets ``--machines`` local machines and ``--jobs`` jobs (spread evenly,
written to the state DB directly). The UI's patrol runs one real pass over every machine (one
agent round trip each, as `rgt watch`), then the first page is requested ``--repeats`` times
from a real uvicorn on 127.0.0.1: ``server`` is the time the app spent (its Server-Timing),
``client`` the whole HTTP round trip. `rgt status --json` runs as a subprocess (the user's
alternative: one process per look, interpreter start-up included) and in-process
(``overview()``). Medians; the goal for the page is <= 300 ms of server time.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

SRC = Path(__file__).resolve().parents[1] / "src"
sys.path.insert(0, str(SRC))


def populate(home: Path, machines: int, jobs: int) -> None:
    from rgt.lifecycle.machines import register_local
    from rgt.models import JobSpec, JobState
    from rgt.state.store import Store, utcnow

    store = Store.open(home / "state.db")
    names = [f"box{n:02d}" for n in range(machines)]
    for name in names:
        register_local(store, name, home / "roots" / name)
    states = [JobState.SUCCEEDED, JobState.FAILED, JobState.RUNNING, JobState.CANCELLED]
    for n in range(jobs):
        machine = names[n % machines]
        spec = JobSpec(
            job_id=f"{machine}-{n:04d}", machine=machine, command=("x",), created=utcnow()
        )
        store.add_job(spec, states[n % len(states)])


def serve(home: Path) -> tuple[str, object]:
    import uvicorn

    from rgt.ui.app import create_app

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    app = create_app(home, "bench", 3600.0)  # one patrol pass at start-up, then quiet
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=1))
    threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True).start()
    while not server.started:
        time.sleep(0.05)
    patrol = app.state.ui.patrol
    while patrol.ticks == 0:  # the first pass over every machine
        time.sleep(0.1)
    return f"http://127.0.0.1:{sock.getsockname()[1]}", server


def time_page(url: str, repeats: int) -> tuple[list[float], list[float]]:
    server, client = [], []
    with httpx.Client(headers={"X-RGT-Token": "bench"}, timeout=60) as http:
        http.get(url + "/")  # warm: templates compiled, results read once
        for _ in range(repeats):
            start = time.perf_counter()
            response = http.get(url + "/")
            client.append(time.perf_counter() - start)
            response.raise_for_status()
            server.append(float(response.headers["server-timing"].split("dur=")[1]) / 1000)
    return server, client


def time_status(home: Path, repeats: int) -> tuple[list[float], list[float]]:
    """`rgt status` reads every non-ended job from its machine (one agent call each): with
    a quarter of the jobs running that is the slow part, so it runs fewer times."""
    from rgt.jobs.overview import overview
    from rgt.state.store import Store

    env = {**os.environ, "RGT_HOME": str(home), "PYTHONPATH": str(SRC)}
    command = [sys.executable, "-m", "rgt.cli", "status", "--json"]
    subprocess_s, inprocess_s = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run(command, env=env, check=True, capture_output=True)
        subprocess_s.append(time.perf_counter() - start)
    store = Store.open(home / "state.db")
    for _ in range(repeats):
        start = time.perf_counter()
        overview(store)
        inprocess_s.append(time.perf_counter() - start)
    return subprocess_s, inprocess_s


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--machines", type=int, default=20)
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--status-repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="rgt-bench-ui-") as tmp:
        home = Path(tmp)
        os.environ["RGT_HOME"] = str(home)
        populate(home, args.machines, args.jobs)
        url, server = serve(home)
        page_server, page_client = time_page(url, args.repeats)
        server.should_exit = True  # type: ignore[attr-defined]
        print(
            f"page server time: median {statistics.median(page_server) * 1000:.1f} ms", flush=True
        )
        status_sub, status_in = time_status(home, args.status_repeats)
    med = statistics.median
    print(f"store: {args.machines} machines, {args.jobs} jobs (a quarter running)")
    print(f"medians of {args.repeats} pages, {args.status_repeats} status runs")
    print(f"{'what':<38}{'median ms':>12}")
    rows = [
        ("rgt ui  GET /  (server time)", med(page_server)),
        ("rgt ui  GET /  (HTTP round trip)", med(page_client)),
        ("rgt status --json  (subprocess)", med(status_sub)),
        ("rgt status  overview() in-process", med(status_in)),
    ]
    for name, seconds in rows:
        print(f"{name:<38}{seconds * 1000:>12.1f}")
    print(f"ratio  page server time / status subprocess: {med(page_server) / med(status_sub):.2f}")
    print(f"ratio  page server time / status in-process: {med(page_server) / med(status_in):.2f}")
    verdict = "meets" if med(page_server) <= 0.3 else "MISSES"
    print(f"goal: first page <= 300 ms server time: {verdict} ({med(page_server) * 1000:.0f} ms)")


if __name__ == "__main__":
    main()
