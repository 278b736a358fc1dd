"""Benchmark of `rgt sweep`.

1. Submission overhead per cell on Slurm: N cells submitted as one array by the sweep launcher
   (code snapshot + push, one state-DB row, spec and slurm.json per cell, one rendered script,
   one sbatch) against a plain loop of N ``sbatch --wrap`` calls, on the real single-node test
   cluster (``tests/slurm.py``'s recipe; needs root, slurm-wlm and munge). Jobs are submitted
   held and cancelled afterwards, so only submission is timed.
2. `rgt sweep status --json` (a fresh CLI process) on 200 cells over 2 SSH machines (two real
   loopback sshds): every cell has a succeeded job whose directory (spec, status.json, DONE)
   is on its machine; the status reads each machine in one agent round trip.

Run: .venv/bin/python bench/bench_sweep.py [--cells N] [--repeat R]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests import slurm as testslurm
from tests.sshd import SshServers, register


@contextmanager
def cluster(directory: Path) -> Iterator[None]:
    """The test suite's single-node Slurm (same recipe as the ``slurm_cluster`` fixture)."""
    reason = testslurm._skip_reason()
    if reason:
        raise SystemExit(f"cannot start Slurm: {reason}")
    directory.mkdir(parents=True)
    munged = testslurm._start_munge(directory)
    conf = testslurm._write_conf(directory)
    os.environ["SLURM_CONF"] = str(conf)
    handle = testslurm.SlurmCluster(conf=conf, directory=directory)
    try:
        subprocess.run(["slurmctld", "-c", "-f", str(conf)], check=True, timeout=30)
        subprocess.run(["slurmd", "-f", str(conf)], check=True, timeout=30)
        testslurm._wait_for(lambda: testslurm._node_idle(handle), 30, "node never idle")
        yield
    finally:
        handle.run("scancel", "--full", "--partition=debug", check=False)
        time.sleep(1)
        testslurm._stop(directory / "slurmd.pid")
        testslurm._stop(directory / "slurmctld.pid")
        if munged:
            os.kill(munged, 15)


def sweep_file(directory: Path, name: str, machines: list[str], cells: int) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "cell.py").write_text("print('cell')\n")
    path = directory / "sweep.toml"
    path.write_text(
        f'name = "{name}"\ncommand = ["python3", "cell.py", "--i", "{{i}}"]\n'
        f"machines = {json.dumps(machines)}\nper_machine = 4\n"
        f"[grid]\ni = {json.dumps(list(range(cells)))}\n"
    )
    return path


def bench_slurm(work: Path, cells: int) -> dict[str, float]:
    from rgt.backends.slurm import register_slurm
    from rgt.state.store import Store
    from rgt.sweep._run import Launcher, RunLog
    from rgt.sweep.sweep import load_sweep

    os.environ["SBATCH_HOLD"] = "1"  # submitted held: nothing runs while we time
    register_slurm(Store.open(), "hpc", root=str(work / "hpc"))
    sweep = load_sweep(sweep_file(work / "proj-slurm", "sb", ["hpc"], cells))
    start = time.perf_counter()
    Launcher(Store.open(), sweep).array(list(sweep.cells), RunLog())
    rgt_s = time.perf_counter() - start
    start = time.perf_counter()
    for i in range(cells):
        argv = ["sbatch", "--parsable", "--hold", "-o", "/dev/null", "--wrap", f"echo {i}"]
        subprocess.run(argv, check=True, capture_output=True, timeout=60)
    plain_s = time.perf_counter() - start
    subprocess.run(["scancel", "--full", "--partition=debug"], check=False, timeout=60)
    os.environ.pop("SBATCH_HOLD")
    return {
        "cells": cells,
        "rgt_array_s": round(rgt_s, 3),
        "rgt_per_cell_ms": round(1000 * rgt_s / cells, 2),
        "sbatch_loop_s": round(plain_s, 3),
        "sbatch_per_cell_ms": round(1000 * plain_s / cells, 2),
        "ratio": round(rgt_s / plain_s, 3),
    }


def fabricate(work: Path, machines: dict[str, Path], cells: int) -> Path:
    """Succeeded jobs for every cell, alternating machines, as the agent would leave them."""
    from rgt.state.store import Store
    from rgt.sweep._run import Launcher
    from rgt.sweep.sweep import load_sweep

    store = Store.open()
    path = sweep_file(work / "proj-status", "st", list(machines), cells)
    sweep = load_sweep(path)
    launcher = Launcher(store, sweep)
    names = list(machines)
    for index, cell in enumerate(sweep.cells):
        machine = names[index % len(names)]
        spec = launcher.spec(cell, machine, "0" * 16)
        store.add_job(spec)
        job = machines[machine] / ".rgt" / "jobs" / spec.job_id
        job.mkdir(parents=True)
        (job / "spec.json").write_text(json.dumps(spec.to_json()))
        status = {"job_id": spec.job_id, "state": "succeeded", "attempt": 1, "label": None}
        (job / "status.json").write_text(json.dumps(status))
        (job / "DONE").write_text("")
    return path


def bench_status(work: Path, cells: int, repeat: int) -> dict[str, float]:
    servers = SshServers(work / "sshd")
    try:
        roots = {f"box{i}": work / f"root{i}" for i in range(2)}
        for name, root in roots.items():
            register(servers(), name, root)
        path = fabricate(work, roots, cells)
        times = []
        for _ in range(repeat):
            start = time.perf_counter()
            proc = subprocess.run(
                [sys.executable, "-m", "rgt.cli", "sweep", "status", str(path), "--json"],
                capture_output=True,
                text=True,
                timeout=300,
            )
            times.append(time.perf_counter() - start)
            counts = json.loads(proc.stdout)["counts"]
            assert counts["succeeded"] == cells, counts
        return {
            "cells": cells,
            "machines": 2,
            "runs": repeat,
            "median_s": round(statistics.median(times), 3),
            "min_s": round(min(times), 3),
            "max_s": round(max(times), 3),
        }
    finally:
        servers.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=32, help="cells submitted on Slurm")
    parser.add_argument("--status-cells", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="rgt-bench-sweep-") as tmp:
        work = Path(tmp)
        work.chmod(0o755)  # munged reads its key from under here
        os.environ["RGT_HOME"] = str(work / "home")
        with cluster(work / "slurm"):
            slurm = bench_slurm(work, args.cells)
        status = bench_status(work, args.status_cells, args.repeat)
    print(json.dumps({"slurm_submission": slurm, "sweep_status": status}, indent=2))


if __name__ == "__main__":
    main()
