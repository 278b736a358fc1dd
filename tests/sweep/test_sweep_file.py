"""Sweep files: cells, stable ids, placeholders, and bad files that name the key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rgt.errors import SpecError
from rgt.sweep.sweep import cell_id, load_sweep
from tests.sweep.helpers import rgt

GOOD = """
name = "lr-demo"
command = ["python3", "train.py", "--lr", "{lr}", "--width", "{width}", "--seed", "{seed}",
           "--tag", "{cell_id}", "--literal", "{{x}}"]
seeds = [0, 1, 2]
machines = ["a", "b"]
per_machine = 2
artifacts = ["outputs/*.pt"]
env = { MODE = "offline" }
[grid]
lr = [0.01, 0.1]
width = [32, 64]
[resources]
cpus = 2
timeout_min = 30
"""


def write(directory: Path, text: str) -> Path:
    path = directory / "sweep.toml"
    path.write_text(text)
    return path


def test_grid_is_a_cartesian_product_times_seeds(hostile_dir: Path) -> None:
    sweep = load_sweep(write(hostile_dir, GOOD))
    assert len(sweep.cells) == 2 * 2 * 3
    assert sweep.code == hostile_dir.resolve()
    assert {(c.overrides["lr"], c.overrides["width"], c.seed) for c in sweep.cells} == {
        (lr, w, s) for lr in (0.01, 0.1) for w in (32, 64) for s in (0, 1, 2)
    }
    first = sweep.cells[0]
    assert first.argv[:7] == ("python3", "train.py", "--lr", "0.01", "--width", "32", "--seed")
    assert first.argv[-3:] == (first.cell_id, "--literal", "{x}")
    assert first.group == "lr=0.01,width=32"
    assert sweep.resources.cpus == 2 and sweep.env == {"MODE": "offline"}
    assert len({c.cell_id for c in sweep.cells}) == 12


def test_cell_ids_are_stable_and_change_with_any_input(tmp_path: Path) -> None:
    reordered = GOOD.replace(
        "lr = [0.01, 0.1]\nwidth = [32, 64]", "width = [64, 32]\nlr = [0.1, 0.01]"
    )
    ids_a = {c.cell_id for c in load_sweep(write(tmp_path, GOOD)).cells}
    ids_b = {c.cell_id for c in load_sweep(write(tmp_path, reordered)).cells}
    assert ids_a == ids_b
    base = cell_id("lr-demo", {"lr": 0.01, "width": 32}, 0)
    assert base in ids_a
    assert base == cell_id("lr-demo", {"width": 32, "lr": 0.01}, 0)
    assert base != cell_id("lr-demo", {"lr": 0.01, "width": 32}, 1)
    assert base != cell_id("lr-demo2", {"lr": 0.01, "width": 32}, 0)
    assert base != cell_id("lr-demo", {"lr": 0.02, "width": 32}, 0)


def test_cells_list_and_default_seed(tmp_path: Path) -> None:
    text = """
name = "pick"
command = ["python3", "t.py", "--opt", "{opt}", "--flag", "{amp}"]
machines = ["a"]
[[cells]]
opt = "adam"
amp = true
[[cells]]
opt = "sgd"
amp = false
"""
    sweep = load_sweep(write(tmp_path, text))
    assert [c.argv[3] for c in sweep.cells] == ["adam", "sgd"]
    assert [c.argv[5] for c in sweep.cells] == ["true", "false"]
    assert {c.seed for c in sweep.cells} == {0}


BAD = [
    ('name = "x"\ncommand = ["a"]\nmachines = ["m"]\nmachine = ["m"]\n', "machine"),
    ('command = ["a"]\nmachines = ["m"]\n', "name"),
    ('name = "bad name"\ncommand = ["a"]\nmachines = ["m"]\n', "name"),
    ('name = "x"\ncommand = "python t.py"\nmachines = ["m"]\n', "command"),
    ('name = "x"\ncommand = ["a", "{lr"]\nmachines = ["m"]\n', "command"),
    ('name = "x"\ncommand = ["a", "{lr.real}"]\nmachines = ["m"]\n[grid]\nlr = [1]\n', "command"),
    ('name = "x"\ncommand = ["a", "{lr}"]\nmachines = ["m"]\n[grid]\nwidth = [1]\n', "command"),
    ('name = "x"\ncommand = ["a"]\nmachines = ["m"]\nseeds = [1, 1]\n', "seeds"),
    ('name = "x"\ncommand = ["a"]\nmachines = ["m"]\nseeds = ["0"]\n', "seeds"),
    ('name = "x"\ncommand = ["a"]\nmachines = []\n', "machines"),
    ('name = "x"\ncommand = ["a"]\nmachines = ["m", "m"]\n', "machines"),
    ('name = "x"\ncommand = ["a"]\nmachines = ["m"]\nper_machine = 0\n', "per_machine"),
    ('name = "x"\ncommand = ["a"]\nmachines = ["m"]\n[grid]\nlr = []\n', "grid.lr"),
    ('name = "x"\ncommand = ["a"]\nmachines = ["m"]\n[grid]\nlr = [1, 1]\n', "grid.lr"),
    ('name = "x"\ncommand = ["a"]\nmachines = ["m"]\n[grid]\nseed = [1]\n', "grid.seed"),
    ('name = "x"\ncommand = ["a"]\nmachines = ["m"]\n[grid]\nlr = [[1]]\n', "grid.lr"),
    (
        'name = "x"\ncommand = ["a"]\nmachines = ["m"]\ncells = [{lr = 1}]\n[grid]\nlr = [1]\n',
        "cells",
    ),
    ('name = "x"\ncommand = ["a"]\nmachines = ["m"]\ncells = [{lr = 1}, {lr = 1}]\n', "cells[1]"),
    ('name = "x"\ncommand = ["a"]\nmachines = ["m"]\ncells = [{lr = {a = 1}}]\n', "cells[0].lr"),
    ('name = "x"\ncommand = ["a"]\nmachines = ["m"]\n[resources]\ngpu = 1\n', "resources.gpu"),
    ('name = "x"\ncommand = ["a"]\nmachines = ["m"]\n[resources]\ncpus = 0\n', "resources.cpus"),
    (
        'name = "x"\ncommand = ["a"]\nmachines = ["m"]\nenv = { RGT_JOB_ID = "1" }\n',
        "env.RGT_JOB_ID",
    ),
    ('name = "x"\ncommand = ["a"]\nmachines = ["m"]\nartifacts = "*.pt"\n', "artifacts"),
    ('name = "x"\ncommand = ["a"]\nmachines = ["m"]\ncode = "nowhere"\n', "code"),
    ('name = "x"\ncommand = ["a"]\nmachines = ["m"]\nretries = -1\n', "retries"),
]


@pytest.mark.parametrize(("text", "key"), BAD)
def test_bad_files_name_the_key(tmp_path: Path, text: str, key: str) -> None:
    with pytest.raises(SpecError) as info:
        load_sweep(write(tmp_path, text))
    assert info.value.field == key
    assert key.split(".")[0].split("[")[0] in info.value.message
    assert info.value.fix


def test_cli_reports_the_key_and_exits_2(tmp_path: Path) -> None:
    path = write(tmp_path, 'name = "x"\ncommand = ["a"]\nmachines = ["m"]\nper_machin = 2\n')
    proc = rgt("sweep", "status", str(path), "--json")
    assert proc.returncode == 2
    error = json.loads(proc.stdout)
    assert error["field"] == "per_machin" and "per_machine" in error["fix"]
    assert "per_machin" in proc.stderr
    broken = write(tmp_path, 'name = "x"\ncommand = [\n')
    assert rgt("sweep", "status", str(broken)).returncode == 2


def test_unknown_machine_is_a_usage_error(tmp_path: Path) -> None:
    path = write(tmp_path, 'name = "x"\ncommand = ["a"]\nmachines = ["nowhere"]\n')
    proc = rgt("sweep", "run", str(path))
    assert proc.returncode == 2
    assert "nowhere" in proc.stderr
