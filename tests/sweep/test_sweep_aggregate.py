"""`aggregate = "/shared/path"`: the cells of a sweep over two machines (this one and a real sshd,
which see the same filesystem, as NFS-sharing hosts do) are collected on that path by the
machines themselves, hash-checked against each job's manifest, and reconciled there: sweep.json
and by-group/ links `rgt verify compare` reads. A second pull copies nothing; a copy that rotted
on the shared disk is copied again."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from rgt.lifecycle.machines import register_local
from rgt.results import find_runs
from rgt.state.store import Store
from rgt.sweep.sweep import load_sweep
from rgt.verify.runtime import of_run
from tests.sshd import SshServer, register
from tests.sweep.helpers import rgt, rgt_json, sweep_toml, write_project

TORCH = """import torch
from torch.utils.data import DataLoader
LOADER = DataLoader(list(range(8)), batch_size=4, shuffle=True, num_workers=0)
"""


@pytest.mark.slow
def test_results_are_collected_and_reconciled_on_the_shared_path(
    sshd_server: SshServer, tmp_path: Path
) -> None:
    register_local(Store.open(), "a", tmp_path / "root-a")
    register(sshd_server, "b", tmp_path / "root-b")
    shared = tmp_path / "shared fs"
    body = sweep_toml("agg", ["a", "b"], lrs=[0.1, 0.2], seeds=[0, 1],
                      extra=f"aggregate = {json.dumps(str(shared))}")  # fmt: skip
    body = body.replace('"python3"', json.dumps(sys.executable))  # torch is in this one
    path = write_project(tmp_path / "proj", body)
    cell = path.parent / "cell.py"  # the helpers' cell, with a torch loader that outlives it
    cell.write_text(TORCH + cell.read_text())
    run = rgt("sweep", "run", str(path), "--poll", "0.3", "--json")
    assert run.returncode == 0, run.stderr
    assert {x["machine"] for x in json.loads(run.stdout)["run"]["launched"]} == {"a", "b"}

    first = rgt_json("sweep", "pull", str(path), cwd=tmp_path)
    root = shared / "agg"
    assert first["ok"] and first["dest"] == str(root)
    assert {c["state"] for c in first["cells"]} == {"done"}
    assert all(c["verified"] and c["copied"] == 1 and c["kept"] == 0 for c in first["cells"])
    on_disk = json.loads((root / "sweep.json").read_text())
    assert {c["cell_id"] for c in on_disk["cells"]} == {c.cell_id for c in load_sweep(path).cells}
    assert not (tmp_path / "rgt-pulls").exists()  # nothing went through this computer
    compare = rgt_json("verify", "compare", str(root / "by-group" / "lr=0.1"),
                       str(root / "by-group" / "lr=0.2"), "--metric", "accuracy")  # fmt: skip
    assert (compare["n_a"], compare["n_b"]) == (2, 2)
    assert all(c["runtime"] for c in first["cells"])  # each job's capture, kept beside it
    group = root / "by-group" / "lr=0.1"
    assert all((d / "rgt-runtime.json").is_file() for d in group.iterdir())
    knobs = [of_run(r).knobs for r in find_runs(group)]
    assert knobs == [{"batch_size": 4, "num_workers": 0}] * 2
    assert not [f for f in compare["findings"] if f["kind"].startswith("knob_")]

    second = rgt_json("sweep", "pull", str(path), cwd=tmp_path)
    assert all(c["copied"] == 0 and c["kept"] == 1 for c in second["cells"])
    victim = first["cells"][0]["cell_id"]
    copy = root / "cells" / victim / "outputs" / "results.json"
    copy.write_text(copy.read_text().replace("0.", "9."))  # rotted on the shared disk
    third = rgt_json("sweep", "pull", str(path), cwd=tmp_path)
    (row,) = [c for c in third["cells"] if c["cell_id"] == victim]
    assert row["copied"] == 1 and row["verified"] and third["ok"]
    assert json.loads(copy.read_text())["seed"] in (0, 1)


def test_aggregate_must_be_an_absolute_path(tmp_path: Path) -> None:
    path = write_project(tmp_path / "p", sweep_toml("x", ["a"], lrs=[0.1], seeds=[0],
                                                    extra='aggregate = "rel/path"'))  # fmt: skip
    bad = rgt("sweep", "status", str(path), "--json")
    assert bad.returncode == 2 and "absolute path" in bad.stderr
