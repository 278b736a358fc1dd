"""Through the local backend: the agent's counts and pull's agree, and a checkpoint folder whose
index names a shard that was never written fails the pull with that reason."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import jsonschema
import pytest

import rgt as rgt_package
from tests.clirun import rgt

JOB = """
import json, os, torch
from safetensors.torch import save_file
out = os.path.join(os.environ["RGT_OUTPUT_DIR"], "checkpoint-2")
os.makedirs(out)
state = {"global_step": 2, "best_metric": float("nan")}
json.dump(state, open(os.path.join(out, "trainer_state.json"), "w"))
save_file({"w": torch.ones(2)}, os.path.join(out, "model-00001-of-00002.safetensors"))
shards = {"w": "model-00001-of-00002.safetensors", "v": "model-00002-of-00002.safetensors"}
json.dump({"weight_map": shards}, open(os.path.join(out, "model.safetensors.index.json"), "w"))
"""


@pytest.mark.slow
def test_an_incomplete_checkpoint_folder_fails_the_pull_with_its_reason(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    (project / "job.py").write_text(JOB)
    assert rgt("up", "local", "--name", "box", "--root", str(tmp_path / "root")).returncode == 0
    run = rgt(
        "run", "box", "--probe-seconds", "1", "--json", "--", sys.executable, "job.py", cwd=project
    )
    assert run.returncode == 0, run.stderr
    job_id = json.loads(run.stdout)["job_id"]
    watched = json.loads(rgt("watch", job_id, "--interval", "0.3", "--json").stdout)
    assert watched["state"] == "succeeded", watched
    manifest = json.loads(next((tmp_path / "root").rglob("manifest.json")).read_text())
    assert manifest["verdicts"] == {
        "ok": 3,
        "hash_only": 0,
        "bad": 0,
    }  # NaN in trainer_state: noted
    schema = Path(rgt_package.__file__).parent / "schemas" / "manifest.schema.json"
    jsonschema.validate(manifest, json.loads(schema.read_text()))
    (unit,) = manifest["units"]
    assert (unit["layout"], unit["verdict"]) == ("hf-trainer", "bad")
    pulled = rgt("pull", job_id, "--to", str(tmp_path / "pulled"))
    assert pulled.returncode != 0
    assert "3 artifact(s): 3 ok, 0 hash_only, 0 bad" in pulled.stdout  # the agent's counts
    assert (
        "names 1 absent shard(s): model-00002-of-00002.safetensors" in pulled.stdout + pulled.stderr
    )
