"""Sweeps on two local machines through the real CLI, agent and files: idempotent re-runs,
failed cells (a bug is not relaunched, a preemption is), duplicates, pull and compare."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from rgt.jobs.launch import LaunchOptions, launch
from rgt.lifecycle.machines import register_local
from rgt.state.store import Store
from rgt.sweep.sweep import load_sweep
from tests.sweep.helpers import ledger_counts, rgt, rgt_json, states, sweep_toml, write_project

HOSTILE = "sw 'q' \"d\" ü $(touch PWNED); x"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    store = Store.open()
    for name in ("a", "b"):
        register_local(store, name, tmp_path / HOSTILE / f"root-{name}")
    (tmp_path / "marks").mkdir()
    return tmp_path / HOSTILE / "proj"


@pytest.mark.slow
def test_failures_reruns_pull_and_duplicates(project: Path, tmp_path: Path) -> None:
    ledger, marks = tmp_path / "ledger", tmp_path / "marks"
    args = ["--fail-lr", "0.2", "--die-once-lr", "0.3", "--marks", str(marks)]
    args += ["--ledger", str(ledger)]
    path = write_project(
        project, sweep_toml("mix", ["a", "b"], lrs=[0.1, 0.2, 0.3], seeds=[0, 1], extra_args=args)
    )
    sweep = load_sweep(path)
    by_lr = {c.cell_id: c.overrides["lr"] for c in sweep.cells}

    first = rgt("sweep", "run", str(path), "--poll", "0.3", "--json")
    assert first.returncode == 1, first.stderr  # some cells failed
    doc = json.loads(first.stdout)
    assert doc["counts"]["succeeded"] == 2 and doc["counts"]["failed"] == 4
    assert len(doc["run"]["launched"]) == 6
    # One slot per machine: a machine that frees its slot first takes the next cell, so the
    # split between the two depends on timing; both must have been used.
    assert {x["machine"] for x in doc["run"]["launched"]} == {"a", "b"}
    for cell in doc["cells"]:
        if by_lr[cell["cell_id"]] == 0.2:
            assert (cell["state"], cell["label"], cell["retryable"]) == (
                "failed",
                "code_error",
                False,
            )
        if by_lr[cell["cell_id"]] == 0.3:
            assert (cell["state"], cell["label"], cell["retryable"]) == (
                "failed",
                "preempted",
                True,
            )

    # Re-run: the bug is not relaunched, the preempted cells are, and they now succeed.
    second = rgt_json("sweep", "run", str(path), "--poll", "0.3", ok=False)
    relaunched = {x["cell_id"] for x in second["run"]["launched"]}
    assert {by_lr[c] for c in relaunched} == {0.3} and len(relaunched) == 2
    assert all(x["job_id"].endswith("-2") for x in second["run"]["launched"])
    assert second["counts"] == {**second["counts"], "succeeded": 4, "failed": 2}

    pulled = rgt_json("sweep", "pull", str(path), "--to", str(tmp_path / "pulled"), ok=False)
    assert pulled["ok"] is True
    assert sorted(r["action"] for r in pulled["cells"]) == ["pulled"] * 4 + ["skipped"] * 2
    for row in pulled["cells"]:
        if row["action"] == "pulled":
            results = tmp_path / "pulled" / row["cell_id"] / "outputs" / "results.json"
            assert json.loads(results.read_text())["name"] == row["cell_id"]
    status = rgt_json("sweep", "status", str(path))
    assert status["counts"]["done"] == 4 and status["counts"]["failed"] == 2

    # Nothing left to do without --retry-failed; with it, only the two bug cells run again.
    third = rgt_json("sweep", "run", str(path), "--poll", "0.3", ok=False)
    assert third["run"]["launched"] == []
    again = rgt_json("sweep", "pull", str(path), "--to", str(tmp_path / "pulled"), ok=False)
    assert sorted(r["action"] for r in again["cells"]) == ["kept"] * 4 + ["skipped"] * 2
    fourth = rgt_json("sweep", "run", str(path), "--retry-failed", "--poll", "0.3", ok=False)
    assert {by_lr[x["cell_id"]] for x in fourth["run"]["launched"]} == {0.2}
    assert fourth["counts"]["failed"] == 2 and fourth["counts"]["done"] == 4
    assert set(ledger_counts(ledger).values()) == {1} and len(ledger_counts(ledger)) == 4

    # A second job of a finished cell started behind the sweep's back: a duplicate.
    victim = next(c for c in sweep.cells if by_lr[c.cell_id] == 0.1)
    env = {
        "RGT_SWEEP": "mix",
        "RGT_CELL_ID": victim.cell_id,
        "RGT_SEED": str(victim.seed),
        "RGT_OVERRIDES": json.dumps(victim.overrides),
    }
    rogue = launch(Store.open(), "b", LaunchOptions(command=victim.argv, cwd=project, env=env))
    assert rgt("watch", rogue.job_id, "--interval", "0.3", "--json").returncode == 0
    final = rgt_json("sweep", "status", str(path))
    assert states(final)[victim.cell_id] == "duplicate"
    assert final["counts"]["duplicate"] == 1 and final["counts"]["done"] == 3
    assert ledger_counts(ledger)[victim.cell_id] == 2  # the ledger agrees: it ran twice
    assert not (Path.cwd() / "PWNED").exists() and not list(tmp_path.rglob("PWNED"))


@pytest.mark.slow
def test_pulled_groups_feed_verify_compare(project: Path, tmp_path: Path) -> None:
    path = write_project(
        project, sweep_toml("cmp", ["a", "b"], lrs=[0.1, 0.2], seeds=[0, 1, 2], per_machine=2)
    )
    run = rgt("sweep", "run", str(path), "--poll", "0.3", "--json")
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["counts"]["succeeded"] == 6
    dest = tmp_path / "out dir"
    rgt_json("sweep", "pull", str(path), "--to", str(dest))
    groups = rgt_json("sweep", "groups", str(path), "--to", str(dest))["groups"]
    assert [(g["group"], g["pulled"]) for g in groups] == [("lr=0.1", 3), ("lr=0.2", 3)]
    result = rgt_json(
        "verify", "compare", groups[0]["path"], groups[1]["path"], "--metric", "accuracy"
    )
    assert (result["n_a"], result["n_b"]) == (3, 3)
    assert result["verdict"] == "effect"  # 0.1 apart, seed spread about 0.025
    assert result["mean_b"] - result["mean_a"] == pytest.approx(0.1, abs=1e-6)
    assert os.path.islink(
        Path(groups[0]["path"]) / sorted(os.listdir(groups[0]["path"]))[0] / "results.json"
    )


def test_a_slurm_machine_must_be_alone(project: Path) -> None:
    from rgt.models import Machine

    store = Store.open()
    store.add_machine(
        Machine(
            name="hpc",
            backend="slurm",
            profile="slurm",
            connection={"slurm": {}},
            durable_root=str(project),
        )
    )
    path = write_project(project, sweep_toml("mixed", ["a", "hpc"], lrs=[0.1], seeds=[0]))
    proc = rgt("sweep", "run", str(path), "--json")
    assert proc.returncode == 2
    error = json.loads(proc.stdout)
    assert error["field"] == "machines" and "array" in error["fix"]
    assert Store.open().jobs() == []  # nothing was launched
