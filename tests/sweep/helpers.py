"""Shared pieces of the sweep tests: a tiny stdlib training cell, sweep files, the CLI."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import Any

from tests import clirun

# A "training" cell: sleeps, optionally fails for one lr (a bug) or SIGKILLs its first job
# (a preemption), writes results.json (rgt.results/1) with a metric that depends on lr and
# seed, and appends one line to a ledger when it ends successfully: the ledger is how the
# tests count completions across machines.
CELL = r"""
import json, os, pathlib, sys, time
args = dict(zip(sys.argv[1::2], sys.argv[2::2]))
lr, seed = float(args["--lr"]), int(args["--seed"])
time.sleep(float(args.get("--sleep", "0")))
if args.get("--fail-lr") and float(args["--fail-lr"]) == lr:
    raise ValueError("this lr is a bug")
if args.get("--die-once-lr") and float(args["--die-once-lr"]) == lr:
    marker = pathlib.Path(args["--marks"], os.environ["RGT_CELL_ID"])
    if not marker.exists():  # killed from outside the first time: a preemption
        marker.write_text("killed")
        os.kill(os.getpid(), 9)
out = pathlib.Path(os.environ["RGT_OUTPUT_DIR"])
noise = (0.0, 0.03, -0.02, 0.01)[seed % 4]  # a fixed seed-to-seed spread
metrics = {"accuracy": {"value": round(0.5 + lr + noise, 6), "direction": "max"}}
doc = {"schema": "rgt.results/1", "name": os.environ["RGT_CELL_ID"], "seed": seed,
       "config": {"lr": lr, **json.loads(os.environ["RGT_OVERRIDES"])}, "metrics": metrics}
(out / "results.json").write_text(json.dumps(doc))
ledger = args.get("--ledger")
if ledger:
    with open(ledger, "a") as handle:
        handle.write(os.environ["RGT_CELL_ID"] + " " + os.environ["RGT_JOB_ID"] + "\n")
print("cell done", os.environ["RGT_CELL_ID"], flush=True)
"""


def write_project(root: Path, body: str) -> Path:
    """A project directory with the cell script and ``sweep.toml``; returns the sweep file."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "cell.py").write_text(CELL)
    sweep = root / "sweep.toml"
    sweep.write_text(body)
    return sweep


def sweep_toml(
    name: str,
    machines: list[str],
    *,
    lrs: list[float],
    seeds: list[int],
    per_machine: int = 1,
    extra_args: list[str] = (),  # type: ignore[assignment]
    extra: str = "",
) -> str:
    command = ["python3", "cell.py", "--lr", "{lr}", "--seed", "{seed}", *extra_args]
    return (
        f"name = {json.dumps(name)}\n"
        f"command = {json.dumps(command)}\n"
        f"seeds = {json.dumps(seeds)}\n"
        f"machines = {json.dumps(machines)}\n"
        f"per_machine = {per_machine}\n"
        "retries = 0\n"
        f"{extra}\n"
        "[grid]\n"
        f"lr = {json.dumps(lrs)}\n"
    )


rgt = partial(clirun.rgt, timeout=240)


def rgt_json(*args: str, cwd: Path | None = None, ok: bool = True) -> dict[str, Any]:
    proc = rgt(*args, "--json", cwd=cwd)
    if ok:
        assert proc.returncode == 0, proc.stderr + proc.stdout
    data: dict[str, Any] = json.loads(proc.stdout)
    return data


def states(doc: dict[str, Any]) -> dict[str, str]:
    return {c["cell_id"]: c["state"] for c in doc["cells"]}


def ledger_counts(path: Path) -> dict[str, int]:
    counts: dict[str, int] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            cell = line.split()[0]
            counts[cell] = counts.get(cell, 0) + 1
    return counts
