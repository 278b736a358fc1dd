"""Fair comparisons: each cell's batch size, workers, accumulation and precision as the job
resolved them (read from its own objects by the sitecustomize hook), kept by `rgt sweep pull`
and checked by `rgt verify compare`. The cells' configs never name a batch size: only the run
time shows that one setting trained with another one."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from rgt.lifecycle.machines import register_local
from rgt.state.store import Store
from tests.sweep.helpers import rgt, rgt_json

# A torch cell. With --unfair, lr=0.2 resolves a bigger batch (as an "auto" batch size or a
# per-GPU split would) and bf16 weights; the config written to results.json is the same
# either way. Its objects live to the end (the exit scan reads them; the scan of a main()'s
# objects while they live is tested in tests/verify/test_compare_runtime.py).
CELL = r"""
import json, os, pathlib, sys
import torch
from torch.utils.data import DataLoader, TensorDataset
args = dict(zip(sys.argv[1::2], sys.argv[2::2]))
lr, seed = float(args["--lr"]), int(args["--seed"])
unfair = args.get("--unfair") == "1" and lr == 0.2
data = TensorDataset(torch.arange(256.0).reshape(128, 2))
train = DataLoader(data, batch_size=64 if unfair else 32, shuffle=True, num_workers=0)
model = torch.nn.Linear(2, 1)
if unfair:
    model = model.to(torch.bfloat16)
for _ in train:
    pass
out = pathlib.Path(os.environ["RGT_OUTPUT_DIR"])
noise = (0.0, 0.03, -0.02)[seed % 3]
doc = {"schema": "rgt.results/1", "name": os.environ["RGT_CELL_ID"], "seed": seed,
       "config": {"lr": lr}, "metrics": {"accuracy": {"value": 0.5 + lr + noise,
                                                      "direction": "max"}}}
(out / "results.json").write_text(json.dumps(doc))
"""


def _sweep(project: Path, name: str, unfair: bool) -> Path:
    project.mkdir(parents=True, exist_ok=True)
    (project / "cell.py").write_text(CELL)
    command = [sys.executable, "cell.py", "--lr", "{lr}", "--seed", "{seed}"]
    command += ["--unfair", "1" if unfair else "0"]
    path = project / "sweep.toml"
    path.write_text(
        f"name = {json.dumps(name)}\ncommand = {json.dumps(command)}\nseeds = [0, 1, 2]\n"
        'machines = ["a"]\nper_machine = 3\nretries = 0\n'
        "[grid]\nlr = [0.1, 0.2]\n"
    )
    return path


def _compare(path: Path, dest: Path) -> dict[str, object]:
    run = rgt("sweep", "run", str(path), "--poll", "0.3", "--json")
    assert run.returncode == 0, run.stderr + run.stdout
    pulled = rgt_json("sweep", "pull", str(path), "--to", str(dest))
    assert all(row["runtime"]["source"] == "runtime" for row in pulled["cells"])
    groups = rgt_json("sweep", "groups", str(path), "--to", str(dest))["groups"]
    return rgt_json(
        "verify", "compare", groups[0]["path"], groups[1]["path"], "--metric", "accuracy"
    )


@pytest.mark.slow
def test_a_cell_that_resolved_another_batch_is_flagged(tmp_path: Path) -> None:
    register_local(Store.open(), "a", tmp_path / "root")
    result = _compare(_sweep(tmp_path / "unfair", "unfair", True), tmp_path / "u")
    differs = {f["evidence"]["knob"]: f for f in result["findings"] if f["kind"] == "knob_differs"}
    assert set(differs) == {"batch_size", "precision"}, result["findings"]
    assert differs["batch_size"]["evidence"]["A"] == ["32"]
    assert differs["batch_size"]["evidence"]["B"] == ["64"]
    assert "besides the swept lr" in differs["batch_size"]["message"]
    assert "bfloat16" in differs["precision"]["message"]


@pytest.mark.slow
def test_cells_that_agree_raise_nothing(tmp_path: Path) -> None:
    register_local(Store.open(), "a", tmp_path / "root")
    dest = tmp_path / "f"
    result = _compare(_sweep(tmp_path / "fair", "fair", False), dest)
    assert not [f for f in result["findings"] if f["kind"].startswith("knob_")]
    doc = json.loads((dest / "sweep.json").read_text())
    knobs = [row["runtime"]["knobs"] for row in doc["cells"]]
    assert knobs == [{"batch_size": 32, "num_workers": 0, "precision": "float32"}] * 6
