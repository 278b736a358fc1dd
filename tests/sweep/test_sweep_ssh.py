"""A 12-cell sweep over two SSH machines — the second a separate host in its own network
namespace — whose sshd is killed half-way and brought back: the cells waiting for a slot move
to the machine that answers, the ones already on the dead machine are never started again
elsewhere and are read back when it returns, no cell runs twice to completion, and the
reconciliation table matches the job directories on both machines exactly."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from rgt.state.store import Store
from rgt.sweep.sweep import load_sweep
from tests.backends.test_ssh_two_hosts import far_server  # noqa: F401  (netns host fixture)
from tests.sshd import SshServer, register, wait_for
from tests.sweep.helpers import ledger_counts, rgt_json, sweep_toml, write_project


def jobs_on(machine: str) -> list[str]:
    return [j.job_id for j in Store.open().jobs(machine)]


def done_dirs(root: Path) -> dict[str, str]:
    """cell id -> job id of every job directory with a DONE marker under ``root``."""
    found = {}
    for done in (root / ".rgt" / "jobs").glob("*/DONE"):
        spec = json.loads((done.parent / "spec.json").read_text())
        found[spec["env"]["RGT_CELL_ID"]] = spec["job_id"]
    return found


def test_twelve_cells_survive_a_dead_sshd(
    sshd_server: SshServer,
    far_server: SshServer,  # noqa: F811
    tmp_path: Path,
) -> None:
    roots = {"near": tmp_path / "near root", "far": tmp_path / "far root"}
    register(sshd_server, "near", roots["near"])
    register(far_server, "far", roots["far"])
    ledger = tmp_path / "ledger"
    args = ["--sleep", "2", "--ledger", str(ledger)]
    lrs = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]
    body = sweep_toml("fan", ["near", "far"], lrs=lrs, seeds=[0, 1], per_machine=2, extra_args=args)
    path = write_project(tmp_path / "proj ü", body)
    cells = {c.cell_id for c in load_sweep(path).cells}
    assert len(cells) == 12

    errors = tmp_path / "sweep-run.stderr"  # a file: a pipe nobody reads would fill and block
    with errors.open("w") as err_file:
        proc = subprocess.Popen(
            [sys.executable, "-m", "rgt.cli", "sweep", "run", str(path), "--poll", "0.3", "--json"],
            stdout=subprocess.PIPE,
            stderr=err_file,
            text=True,
            # Every ssh call, and where the run stands when aborted: shown if the test fails.
            env={**os.environ, "RGT_DEBUG": "1", "PYTHONFAULTHANDLER": "1"},
        )
    try:
        assert wait_for(lambda: len(jobs_on("far")) >= 2, timeout=90), "far never got 2 jobs"
        far_server.stop()  # half-way: far's agents keep running, nobody can ask them
        before = set(jobs_on("far"))
        near_before = len(jobs_on("near"))
        assert wait_for(lambda: len(jobs_on("near")) >= near_before + 2, timeout=90)
        time.sleep(3)  # far's jobs finish while its sshd is down
        far_server.start()
        out = proc.communicate(timeout=420)[0]  # it starts first, beside the demo and Slurm
    except BaseException:
        proc.send_signal(signal.SIGABRT)
        proc.communicate(timeout=30)
        print(errors.read_text()[-12000:])
        subprocess.run([sys.executable, "-m", "rgt.cli", "sweep", "status", str(path)], timeout=120)
        raise
    finally:
        if proc.poll() is None:
            proc.kill()
        if far_server.proc and far_server.proc.poll() is not None:
            far_server.start()
    assert proc.returncode == 0, errors.read_text()[-12000:] + out
    doc = json.loads(out)

    # None ran twice to completion: one ledger line, one DONE directory per cell, in total.
    assert ledger_counts(ledger) == dict.fromkeys(cells, 1)
    near_done, far_done = done_dirs(roots["near"]), done_dirs(roots["far"])
    assert not set(near_done) & set(far_done)
    assert set(near_done) | set(far_done) == cells

    # Cells were moved to near while far was down; far's own cells stayed on far.
    assert doc["run"]["moved"], "no cell was launched elsewhere while far was down"
    assert {m["machine"] for m in doc["run"]["moved"]} == {"near"}
    assert all(m["away_from"] == ["far"] for m in doc["run"]["moved"])
    started_on_far = {j for j in before if Store.open().job(j).state.value == "succeeded"}
    assert started_on_far, "no job that was on far when it died finished there"
    assert started_on_far <= set(far_done.values())

    # The reconciliation table is exact: every cell succeeded, on the machine that has its DONE.
    table = rgt_json("sweep", "status", str(path))
    assert table["counts"]["succeeded"] == 12
    assert sum(table["counts"].values()) == 12 and table["unreachable"] == {}
    for cell in table["cells"]:
        winner = {**near_done, **far_done}[cell["cell_id"]]
        assert cell["machine"] == ("near" if cell["cell_id"] in near_done else "far")
        assert winner in [j["job_id"] for j in cell["jobs"] if j["state"] == "succeeded"]

    pulled = rgt_json("sweep", "pull", str(path), "--to", str(tmp_path / "pulled"))
    assert pulled["ok"] and all(r["action"] == "pulled" for r in pulled["cells"])
    assert rgt_json("sweep", "status", str(path))["counts"]["done"] == 12
