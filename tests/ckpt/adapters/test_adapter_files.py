"""What RgtCheckpoint leaves on disk: no second checkpoint from Lightning (its default
ModelCheckpoint is not added while a Checkpoint callback is in ``callbacks``), a warning when
the script adds one itself, and checkpoints that `rgt verify artifacts` passes (``ok`` or
``hash_only``), the ModelCheckpoint's ``inf`` kth score in the callback state included; and the
same for ``accelerate_loop``'s checkpoints (model, AdamW moments, scheduler, generator, RNG) and
``RgtTrainerCheckpoint``'s (the Trainer's state and log history included)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.clirun import rgt

if importlib.util.find_spec("pytorch_lightning") is None:
    pytest.skip("pytorch_lightning is not installed", allow_module_level=True)

pytestmark = pytest.mark.slow  # real Lightning fits
SCRIPT = Path(__file__).with_name("_lightning_files.py")


def _fit(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), *args], cwd=cwd, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def _verdicts(directory: Path) -> dict[str, str]:
    proc = rgt("verify", "artifacts", str(directory), "--json")
    files = json.loads(proc.stdout)["files"]
    return {f["path"]: f.get("verdict") or ("ok" if f["ok"] else "bad") for f in files}


def test_lightning_writes_no_second_checkpoint(tmp_path: Path) -> None:
    proc = _fit(tmp_path, str(tmp_path / "ckpt"))
    assert (tmp_path / "lightning_logs").is_dir()  # its logger ran where its files would go
    assert sorted(p.name for p in tmp_path.rglob("*.ckpt")) == []
    assert "ModelCheckpoint" not in proc.stderr
    verdicts = _verdicts(tmp_path / "ckpt")
    assert len(verdicts) == 4 and set(verdicts.values()) <= {"ok", "hash_only"}, verdicts


def test_a_model_checkpoint_of_the_script_still_writes_and_is_named(tmp_path: Path) -> None:
    proc = _fit(tmp_path, str(tmp_path / "ckpt"), "--model-checkpoint", str(tmp_path / "own"))
    assert "a ModelCheckpoint (dirpath " in proc.stderr and str(tmp_path / "own") in proc.stderr
    assert list((tmp_path / "own").glob("*.ckpt"))  # documented: the script's own writer
    verdicts = _verdicts(tmp_path / "ckpt")  # callback state holds kth_value = inf: normal
    assert len(verdicts) == 4 and set(verdicts.values()) <= {"ok", "hash_only"}, verdicts


@pytest.mark.skipif(importlib.util.find_spec("accelerate") is None, reason="no accelerate")
def test_accelerate_loop_checkpoints_pass_the_verifier(tmp_path: Path) -> None:
    script = Path(__file__).with_name("_accelerate_files.py")
    proc = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "ckpt")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    verdicts = _verdicts(tmp_path / "ckpt")
    assert len(verdicts) >= 4 and set(verdicts.values()) <= {"ok", "hash_only"}, verdicts


@pytest.mark.skipif(importlib.util.find_spec("transformers") is None, reason="no transformers")
def test_hf_trainer_checkpoints_pass_the_verifier(tmp_path: Path) -> None:
    script = Path(__file__).with_name("_hf_files.py")
    proc = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "ckpt"), str(tmp_path / "out")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    verdicts = _verdicts(tmp_path / "ckpt")
    assert len(verdicts) >= 4 and set(verdicts.values()) <= {"ok", "hash_only"}, verdicts
