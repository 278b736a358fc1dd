"""A delivery workspace built from real demo training runs (examples/train_demo.py), plus
runs written from the rgt.results/1 schema where a test needs values it controls."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from deliver_helpers import make_run

from rgt.deliver.runs import record_run
from rgt.deliver.workspace import Workspace, init_workspace

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "examples" / "train_demo.py"
SEEDS = (0, 1, 2)


@pytest.fixture(scope="session")
def demo_runs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Three seeds of the demo, 20 steps each, trained in parallel (real torch runs)."""
    base = tmp_path_factory.mktemp("demo-runs")
    procs, dirs = [], []
    for seed in SEEDS:
        out = base / f"seed {seed}"  # a space in the path, as users have
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("RGT_")},
            "RGT_OUTPUT_DIR": str(out),
            "RGT_CKPT_DIR": str(base / f"ckpt-{seed}"),
        }
        cmd = [
            sys.executable,
            str(DEMO),
            "--steps",
            "20",
            "--seed",
            str(seed),
            "--ckpt-every",
            "50",
        ]
        procs.append(
            subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        )
        dirs.append(out)
    for proc in procs:
        output, _ = proc.communicate(timeout=300)
        assert proc.returncode == 0, output.decode()[-2000:]
    return dirs


@pytest.fixture
def demo_ws(tmp_path: Path, demo_runs: list[Path]) -> Workspace:
    ws = init_workspace(tmp_path / "delivery")
    for run in demo_runs:
        record_run(ws, run)
    return ws


@pytest.fixture
def paper_ws(tmp_path: Path) -> Workspace:
    """Three seeds with accuracy mean 0.8734 and loss mean 0.412, recorded, two claims."""
    from rgt.deliver.evidence import Claim, add_claim
    from rgt.deliver.numbers import NumberFormat

    ws = init_workspace(tmp_path / "paper" / "delivery")
    for seed, (acc, loss) in enumerate([(0.8712, 0.402), (0.8734, 0.412), (0.8756, 0.422)]):
        run = make_run(tmp_path / "pulled" / f"s{seed}", seed=seed,
                       metrics={"test_accuracy": acc, "test_loss": loss})  # fmt: skip
        record_run(ws, run)
    add_claim(ws, Claim("acc", "our accuracy", "test_accuracy", run_glob="base-*",
                        format=NumberFormat(2, percent=True)))  # fmt: skip
    add_claim(ws, Claim("loss", "our loss", "test_loss", run_glob="base-*",
                        format=NumberFormat(3)))  # fmt: skip
    return ws
