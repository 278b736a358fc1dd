"""One corpus of real tracker data per test session, written concurrently by the trackers'
own libraries in subprocesses, under a folder whose name breaks naive quoting."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
HOSTILE = "tracker data ünï $(touch PWNED) it's"
# (writer, folder under the corpus); the killed runs go next to their tracker's other runs.
JOBS = (
    ("mlflow", "mlflow"),
    ("tensorboard", "tensorboard"),
    ("wandb", "wandb"),
    ("trackio", "trackio"),
    ("wandb_killed", "wandb"),
)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        MLFLOW_ALLOW_FILE_STORE="true",
        WANDB_MODE="offline",
        WANDB_SILENT="true",
        WANDB_DISABLE_GIT="true",
        PYTHONPATH=str(REPO),
    )
    return env


def _start(kind: str, folder: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.verify.tracker.writers", kind, str(folder)],
        cwd=folder.parent,
        env=_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


@pytest.fixture(scope="session")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("trackers") / HOSTILE
    for _, folder in JOBS:
        (root / folder).mkdir(parents=True, exist_ok=True)
    procs = [(kind, _start(kind, root / folder)) for kind, folder in JOBS]
    # The killed MLflow run must not race the others for the experiment's creation.
    _finish(procs[:1])
    _finish([("mlflow_killed", _start("mlflow_killed", root / "mlflow"))], killed=True)
    _finish(procs[1:4])
    _finish(procs[4:], killed=True)
    return root


def _finish(procs: list[tuple[str, subprocess.Popen[bytes]]], killed: bool = False) -> None:
    for kind, proc in procs:
        _, err = proc.communicate(timeout=120)
        expected = -9 if killed else 0
        assert proc.returncode == expected, f"{kind} writer: {err.decode()[-2000:]}"
