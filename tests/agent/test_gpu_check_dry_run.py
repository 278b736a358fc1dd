"""The prepared device check of issue 35 (tools/gpu_check/run.sh) runs here, end to end, on
the CPU: its ``--cpu`` dry run drives the same steps a GPU session runs (real agents and
their GPU picker against a recorded nvidia-smi answer, FSDP2 with rgt's sharded saves under
torchrun on gloo, a rank's ``kill -9`` and exact resume, the save timings), so the script
cannot rot between the sessions that are lent a GPU. The shape is the lent machine's (one
H100, so one rank, and rank 0 is killed); a two-GPU box's (``--smi 2xrtx4090``: two ranks, rank
1 killed) runs the same way by hand, and two ranks killed and resumed are the sharded tests'
own (tests/ckpt/test_sharded_resume*.py), so CI runs the device's shape only."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]
H100 = "0, GPU-00000000-0000-0000-0000-000000000000, NVIDIA H100 80GB HBM3, 0, 81559\n"


@pytest.mark.slow
@pytest.mark.early  # four torchrun groups and seven agents: 30-180 s on a loaded 2-core box
@pytest.mark.parametrize(
    ("smi", "answer", "victim"),
    [pytest.param("1xh100", H100, 0, id="1xh100")],
)
def test_the_gpu_check_passes_its_cpu_dry_run(
    tmp_path: Path, smi: str, answer: str, victim: int
) -> None:
    out, work = tmp_path / "out", tmp_path / "work"
    env = dict(os.environ, OUT=str(out), GC_WORK=str(work), PYTHON=sys.executable)
    done = subprocess.run(
        ["bash", str(ROOT / "tools" / "gpu_check" / "run.sh"), "--cpu", "--smi", smi],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=560,
        check=False,
    )
    log = done.stdout + done.stderr
    assert done.returncode == 0, log[-6000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["ok"] and [s["number"] for s in summary["steps"]] == [1, 2, 3, 4]
    failed = [line for s in summary["steps"] for line in s["evidence"] if line.startswith("FAIL")]
    assert failed == [] and all(s["ok"] for s in summary["steps"]), failed
    assert (out / "gpu_check.log").read_text() == done.stdout  # run.sh keeps the whole output
    assert (out / "nvidia-smi-query.csv").read_text() == answer  # what the agent's query read
    assert summary["world"] == victim + 1
    kill = "\n".join(summary["steps"][2]["evidence"])
    named = f"ok      the evidence names the killed rank: ['torchrun: first failing rank {victim}"
    assert named in kill
    assert "final weights and optimizer state equal the reference's: SHA-256 equal" in kill
    names = sorted(p.name for p in out.iterdir())
    assert len(names) <= 8 and all(p.stat().st_size < 16 << 20 for p in out.iterdir()), names
