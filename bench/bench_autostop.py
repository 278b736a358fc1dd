"""Benchmark of autostop's reaction on the local backend: condition met -> stop action.

Each trial registers a local machine whose ``--self-stop`` only records the time it ran
(``date +%s.%N``), launches a job that writes one artifact and exits after 3 s + 1.3 s × trial
(its end falls at a different phase of the tick each time), and arms ``--after-jobs`` with
the production tick (5 s; RGT_AUTOSTOP_TICK_S is removed from the environment). The reaction
is the time from the job's ``ended`` in status.json (written after its manifest was verified:
the condition is met) to the stop action's own timestamp; it includes the watcher's re-hash of
every artifact. Goal <= 60 s (SkyPilot's skylet checks each minute).

The policy is written by the library (``rgt.autostop.arm.prepare`` + ``install``), the same
functions `rgt approve NAME --autostop` calls after the human approved at the terminal.

Run: .venv/bin/python bench/bench_autostop.py [--trials N]
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
from datetime import datetime
from pathlib import Path

# The job's length varies per trial (3 s + 1.3 s × trial) so that its end falls at different
# phases of the watcher's 5 s tick.
JOB = "import time\ntime.sleep({s})\nopen('out.txt', 'w').write('result')\n"


def rgt(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "rgt.cli", *args]
    return subprocess.run(argv, capture_output=True, text=True, cwd=cwd, timeout=120, check=True)


def trial(base: Path, index: int) -> float:
    from rgt.autostop import arm
    from rgt.autostop.policy import Options
    from rgt.state.store import Store

    name, root, record = f"b{index}", base / f"root{index}", base / f"STOP{index}"
    rgt(
        "up",
        "local",
        "--name",
        name,
        "--root",
        str(root),
        "--self-stop",
        f"date +%s.%N >> {record}",
    )
    proj = base / f"proj{index}"
    proj.mkdir()
    (proj / "train.py").write_text(JOB.format(s=3 + 1.3 * index))
    run = rgt("run", name, "--json", "--probe-seconds", "0", "--", "python3", "train.py", cwd=proj)
    job = json.loads(run.stdout)["job_id"]
    store = Store.open()
    money = {"price_per_hour": None, "spent_at_arm": 0.0}  # a local machine has no price
    arm.install(store, name, arm.prepare(store, name, Options(after_jobs=True), money), None)
    deadline = time.monotonic() + 120
    while not (record.exists() and record.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.05)
    stopped = float(record.read_text().split()[0])
    status = json.loads((root / ".rgt" / "jobs" / job / "status.json").read_text())
    ended = datetime.fromisoformat(status["ended"].replace("Z", "+00:00")).timestamp()
    return stopped - ended


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=5)
    args = parser.parse_args()
    os.environ.pop("RGT_AUTOSTOP_TICK_S", None)
    with tempfile.TemporaryDirectory(prefix="rgt-bench-autostop-") as tmp:
        base = Path(tmp)
        os.environ["RGT_HOME"] = str(base / "home")
        from rgt.lifecycle.approvals import record_no_pin

        record_no_pin("bench")  # the bench arms through the library, never at a terminal
        times = [trial(base, i) for i in range(args.trials)]
    print(f"autostop reaction (job ended -> stop action ran), {args.trials} trials, tick 5 s:")
    print("  " + " ".join(f"{t:.2f}" for t in times) + " s")
    print(
        f"  median {statistics.median(times):.2f} s, max {max(times):.2f} s "
        f"(goal <= 60 s: {'met' if max(times) <= 60 else 'NOT met'})"
    )


if __name__ == "__main__":
    main()
