"""Stated seeds and what a job really ran with: `rgt run` records RGT_SEED (given or drawn)
and exports it; the sitecustomize hook captures the determinism flags the job saw and the
knobs it resolved (from a main() whose objects are gone by exit); `rgt verify compare` flags
a knob that differs besides the swept variable."""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from rgt.results import write_results
from rgt.state.store import Store
from rgt.verify import runtime
from rgt.verify.compare import compare
from tests.agent.conftest import agent_pyz, make_job  # noqa: F401  (fixtures)
from tests.clirun import ok
from tests.clirun import rgt as _rgt

rgt = functools.partial(_rgt, timeout=300)  # jobs on a loaded shared machine take their time

JOB = """
import os, torch
from torch.utils.data import DataLoader, TensorDataset
torch.manual_seed(int(os.environ["RGT_SEED"]))
torch.backends.cudnn.benchmark = False
torch.backends.cudnn.deterministic = True
torch.use_deterministic_algorithms(True)
def main():
    data = TensorDataset(torch.zeros(64, 3))
    train = DataLoader(data, batch_size=16, shuffle=True, num_workers=2)
    evaluate = DataLoader(data, batch_size=64)
    scaler = torch.amp.GradScaler("cpu")
    model = torch.nn.Linear(3, 1)
    for _ in range(3):
        for (x,) in train:
            model(x)
    import time; time.sleep(3)
main()
"""


def _runtime(job_dir: Path) -> dict[str, Any]:
    return json.loads((job_dir / "runtime.json").read_text())


def test_the_hook_reads_what_the_job_built_and_saw(make_job) -> None:  # noqa: F811
    env = {"RGT_SEED": "1234", "CUBLAS_WORKSPACE_CONFIG": ":4096:8", "PYTHONHASHSEED": "0",
           "RGT_RUNTIME_SCAN_S": "0.3"}  # fmt: skip
    job = make_job().write(JOB, env=env)
    job.start()
    assert job.finish() == 0, job.agent_log() + Path(job.paths.log(1)).read_text()
    doc = _runtime(job.dir)
    (capture,) = doc["processes"].values()  # the two DataLoader workers wrote nothing
    flags = capture["determinism"]
    assert flags["RGT_SEED"] == "1234" and flags["torch_initial_seed"] == 1234
    assert flags["cudnn_deterministic"] is True and flags["cudnn_benchmark"] is False
    assert flags["deterministic_algorithms"] is True and flags["deterministic_warn_only"] is False
    assert flags["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8" and flags["PYTHONHASHSEED"] == "0"
    knobs = runtime.from_capture(capture).knobs
    assert knobs == {"batch_size": 16, "num_workers": 2, "precision": "fp16-amp (GradScaler), "
                     "params float32"}  # fmt: skip
    assert "Warning" not in Path(job.paths.log(1)).read_text()  # the scan says nothing
    manifest = json.loads((job.dir / "manifest.json").read_text())
    assert manifest["files"] == []  # job metadata, not an artifact


def test_a_job_without_torch_writes_nothing(make_job) -> None:  # noqa: F811
    job = make_job().write("import json\nprint(json.dumps(1))\n")
    job.start()
    assert job.finish() == 0
    assert not (job.dir / "runtime.json").exists()


def _group(root: Path, name: str, lr: float, knobs: Sequence[dict[str, Any]]) -> str:
    for seed, resolved in enumerate(knobs):
        run = root / f"{name}-s{seed}"
        run.mkdir(parents=True)
        write_results(run, {"name": name, "seed": seed, "config": {"lr": lr, "seed": seed},
                            "metrics": {"acc": {"value": 0.5 + lr + 0.01 * seed,
                                                "direction": "max"}}})  # fmt: skip
        capture = {"time": 1.0, "knobs": resolved, "determinism": {}}
        (run / runtime.FILENAME).write_text(json.dumps({"processes": {"1-1": capture}}))
    return str(root / f"{name}-s*")


def test_compare_flags_a_knob_besides_the_swept_variable(tmp_path: Path) -> None:
    same = {"batch_size": 32, "num_workers": 4, "precision": "bf16"}
    a = _group(tmp_path, "a", 0.1, [same, same, same])
    b = _group(tmp_path, "b", 0.2, [same, {**same, "batch_size": 64}, same])
    kinds = {(f.kind, f.evidence.get("knob")) for f in compare(a, b, "acc").findings}
    assert ("knob_differs", "batch_size") in kinds
    assert ("knob_varies_in_group", "batch_size") in kinds
    assert not {k for k in kinds if k[1] in ("num_workers", "precision")}
    c = _group(tmp_path, "c", 0.2, [same] * 3)
    assert not [f for f in compare(a, c, "acc").findings if f.kind.startswith("knob_")]


def test_the_swept_knob_itself_is_not_flagged_and_configs_are_the_fallback(tmp_path: Path) -> None:
    for name, bs in (("x", 32), ("y", 64)):
        for seed in range(3):
            (tmp_path / f"{name}-s{seed}").mkdir()
            write_results(tmp_path / f"{name}-s{seed}", {
                "name": name, "seed": seed,
                "config": {"train": {"per_device_train_batch_size": bs}, "num_workers": 8},
                "metrics": {"acc": {"value": bs / 100 + 0.01 * seed,
                                    "direction": "max"}}})  # fmt: skip
    result = compare(str(tmp_path / "x-s*"), str(tmp_path / "y-s*"), "acc")
    assert result.changed_keys == ("train.per_device_train_batch_size",)
    assert not [f for f in result.findings if f.kind.startswith("knob_")]
    run = runtime.of_run(__import__("rgt.results").results.find_runs(str(tmp_path / "x-s0"))[0])
    assert (run.source, run.knobs) == ("config", {"batch_size": 32, "num_workers": 8})


def test_resolve_seed_order() -> None:
    assert runtime.resolve_seed({"RGT_SEED": "9"}, 5, {"RGT_SEED": "7"}) == "9"
    assert runtime.resolve_seed({}, 5, {"RGT_SEED": "7"}) == "5"
    assert runtime.resolve_seed({}, None, {"RGT_SEED": "7"}) == "7"
    drawn = {runtime.resolve_seed({}, None, {}) for _ in range(5)}
    assert len(drawn) > 1 and all(0 <= int(s) < 2**31 for s in drawn)
    with pytest.raises(Exception, match="whole number"):
        runtime.resolve_seed({"RGT_SEED": "abc"}, None, {})


@pytest.mark.slow
def test_rgt_run_records_and_exports_the_seed(tmp_path: Path) -> None:
    assert rgt("up", "local", "--name", "me", "--root", str(tmp_path / "root")).returncode == 0
    job = "import os; print('seed is', os.environ['RGT_SEED'])"
    given = ok(rgt("run", "me", "--seed", "4242", "--probe-seconds", "5", "--json", "--",
                   sys.executable, "-c", job))  # fmt: skip
    drawn = ok(rgt("run", "me", "--probe-seconds", "5", "--json", "--", sys.executable, "-c",
                   job))  # fmt: skip
    assert given["seed"] == "4242" and drawn["seed"].isdigit()
    store = Store.open()
    for result in (given, drawn):
        record = store.job(result["job_id"])
        assert record.spec.env["RGT_SEED"] == result["seed"]  # in the job's record
        logs = rgt("logs", result["job_id"], "-f")
        assert f"seed is {result['seed']}" in logs.stdout  # and the job saw it


@pytest.mark.slow
def test_a_pulled_job_brings_the_flags_it_saw(tmp_path: Path) -> None:
    """`rgt pull` keeps the job's capture beside the artifacts; pulling again is still clean."""
    assert rgt("up", "local", "--name", "me", "--root", str(tmp_path / "root")).returncode == 0
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "train.py").write_text(
        "import os, pathlib, torch\ntorch.manual_seed(int(os.environ['RGT_SEED']))\n"
        "pathlib.Path(os.environ['RGT_OUTPUT_DIR'], 'w.txt').write_text('x')\n"
    )
    job = ok(rgt("run", "me", "--seed", "77", "--probe-seconds", "0", "--json", "--",
                 sys.executable, "train.py", cwd=tmp_path / "p"))["job_id"]  # fmt: skip
    assert rgt("logs", job, "-f").returncode == 0
    dest = tmp_path / "got"
    first = ok(rgt("pull", job, "--to", str(dest), "--json"))
    flags = first["runtime"]["determinism"]
    assert flags["RGT_SEED"] == "77" and flags["torch_initial_seed"] == 77
    assert (dest / runtime.FILENAME).is_file()
    again = ok(rgt("pull", job, "--to", str(dest), "--json"))  # the capture is not "unexpected"
    assert again["ok"] and again["runtime"]["source"] == "runtime"


HF = """
from transformers import TrainingArguments
args = TrainingArguments(output_dir="out", per_device_train_batch_size=8, report_to=[],
                         gradient_accumulation_steps=4, dataloader_num_workers=2)
"""
LIGHTNING = """
import pytorch_lightning as pl
trainer = pl.Trainer(accumulate_grad_batches=3, precision="bf16-mixed", accelerator="cpu",
                     logger=False, enable_checkpointing=False, enable_progress_bar=False)
"""


@pytest.mark.slow
@pytest.mark.parametrize(
    ("script", "knobs"),
    [
        (HF, {"batch_size": 8, "grad_accum": 4, "num_workers": 2, "precision": "fp32"}),
        (LIGHTNING, {"grad_accum": 3, "precision": "bf16-mixed"}),
    ],
    ids=["transformers", "lightning"],
)
def test_the_frameworks_own_settings_are_read(
    make_job,  # noqa: F811
    script: str,
    knobs: dict[str, Any],
) -> None:
    job = make_job().write(script)
    job.start()
    assert job.finish() == 0, job.agent_log() + Path(job.paths.log(1)).read_text()
    (capture,) = _runtime(job.dir)["processes"].values()
    assert runtime.from_capture(capture).knobs == knobs
