"""`rgt smoke` knows where frameworks write checkpoints when the script names no place
(Lightning's lightning_logs/version_*/checkpoints, accelerate's step_N, the HF Trainer's
checkpoint-N), and when a resume is not exact it names the first differing tensor and the
likely cause in the script, with the fix. Real Lightning runs on the CPU."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

import pytest

from rgt.agent import _ckpt_find
from tests.resume.test_smoke_scripts import smoke

SCRIPTS = Path(__file__).parent / "frameworks"
PY = sys.executable
lightning = pytest.mark.skipif(
    importlib.util.find_spec("pytorch_lightning") is None, reason="no pytorch_lightning"
)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "my project"
    root.mkdir()
    for script in SCRIPTS.glob("*.py"):
        shutil.copy(script, root / script.name)
    return root


def test_the_default_places_of_each_framework_are_found(tmp_path: Path) -> None:
    for rel in ("lightning_logs/version_0/checkpoints/epoch=0-step=8.ckpt",
                "out/checkpoint-40/model.safetensors", "out/checkpoint-40/trainer_state.json",
                "output/step_60/model.safetensors", "src/step_1.py"):  # fmt: skip
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("{}")
    found, kind = _ckpt_find.framework_newest(str(tmp_path), None)
    assert kind is not None and found.path is not None
    kinds = {}
    for name, pattern, folder in _ckpt_find.FRAMEWORK_GLOBS:
        hit = _ckpt_find.newest(pattern, [("work", str(tmp_path))], None).path
        if hit and Path(hit).is_dir() == folder:
            kinds[name] = Path(hit).relative_to(tmp_path).as_posix()
    assert kinds == {
        "lightning": "lightning_logs/version_0/checkpoints/epoch=0-step=8.ckpt",
        "hf_trainer": "out/checkpoint-40",
        "accelerate": "output/step_60",
    }
    assert _ckpt_find.step_of(str(tmp_path / kinds["lightning"])) == ("step", 8)
    assert _ckpt_find.step_of(str(tmp_path / "output/step_60")) == ("step", 60)


@pytest.mark.slow
def test_accelerate_style_folders_are_found_without_ckpt(project: Path) -> None:
    code, doc = smoke(project, "--resume-with", "--resume_from_checkpoint {ckpt}", "--",
                      PY, "accelerate_style.py")  # fmt: skip
    resume = doc["resume"]
    assert code == 0 and resume["checked"] and resume["continued"], doc
    assert resume["ckpt"].startswith("output/step_") and "wrote no checkpoint" not in doc["reason"]


@lightning
@pytest.mark.slow
def test_an_unmodified_lightning_script_is_checked_without_ckpt(project: Path) -> None:
    code, doc = smoke(project, "--", PY, "lightning_plain.py")
    resume = doc["resume"]
    assert "wrote no checkpoint" not in doc["reason"] and resume["checked"], doc
    assert resume["ckpt"].startswith("lightning_logs/version_0/checkpoints/epoch=")
    assert resume["step_source"] == "torch:global_step" and resume["ckpt_step"] > 0
    # The same command again starts over: smoke says so, and how Lightning resumes.
    assert code == 1 and resume["continued"] is False
    assert "--resume-with '--ckpt_path {ckpt}'" in doc["reason"]
    code, doc = smoke(
        project, "--resume-with", "--ckpt_path {ckpt}", "--", PY, "lightning_plain.py"
    )
    assert code == 0 and doc["resume"]["continued"] is True, doc["reason"]


@lightning
@pytest.mark.slow
def test_a_resume_that_is_not_exact_names_the_tensor_and_the_cause(project: Path) -> None:
    code, doc = smoke(project, "--", PY, "lightning_rgt.py")
    resume = doc["resume"]
    assert code == 1 and doc["exact_resume"] is False and resume["exact"] is False, doc
    assert resume["first_difference"].startswith("lightning.state_dict.layer.weight: "), resume
    [cause] = [c for c in resume["likely_causes"] if "DataLoader" in c["cause"]]
    lines = (project / "lightning_rgt.py").read_text().splitlines()
    line = next(i for i, text in enumerate(lines, 1) if "DataLoader(data" in text)
    assert cause["where"] == f"lightning_rgt.py:{line}" and "generator=" in cause["fix"]
    assert "first difference: lightning.state_dict.layer.weight" in doc["reason"]
    assert "likely cause: a DataLoader shuffles with the global RNG" in doc["reason"]
