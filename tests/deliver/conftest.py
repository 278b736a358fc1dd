"""A delivery workspace built from real demo training runs (examples/train_demo.py), plus
runs written from the rgt.results/1 schema where a test needs values it controls."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rgt.deliver.runs import record_run
from rgt.deliver.workspace import Workspace, init_workspace
from tests.deliver.deliver_helpers import make_run

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "examples" / "train_demo.py"
SEEDS = (0, 1, 2)


# One interpreter trains every seed (torch is imported once); each run is the real script,
# executed as __main__ with its own argv and RGT_OUTPUT_DIR / RGT_CKPT_DIR.
_DRIVER = """
import os, runpy, sys
demo, base = sys.argv[1], sys.argv[2]
for seed in sys.argv[3:]:
    os.environ["RGT_OUTPUT_DIR"] = os.path.join(base, "seed " + seed)
    os.environ["RGT_CKPT_DIR"] = os.path.join(base, "ckpt-" + seed)
    sys.argv = [demo, "--steps", "20", "--seed", seed, "--ckpt-every", "50"]
    runpy.run_path(demo, run_name="__main__")
"""


@pytest.fixture(scope="session")
def demo_runs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Three seeds of the demo, 20 steps each: real torch training runs."""
    base = tmp_path_factory.mktemp("demo-runs")
    env = {k: v for k, v in os.environ.items() if not k.startswith("RGT_")}
    seeds = [str(s) for s in SEEDS]
    proc = subprocess.run(
        [sys.executable, "-c", _DRIVER, str(DEMO), str(base), *seeds],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    return [base / f"seed {seed}" for seed in seeds]  # a space in the path, as users have


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
