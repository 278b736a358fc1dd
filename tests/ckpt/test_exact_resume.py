"""The demo training script, killed with kill -9 and resumed, ends bit-identical to a run that
was never interrupted; it also honours RGT_SMOKE=1 and stops cleanly on SIGTERM."""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from rgt.ckpt import Checkpointer
from tests.ckpt._fork_server import Client

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "train_demo.py"
ZYGOTE = Path(__file__).with_name("_demo_zygote.py")
# 8 steps per epoch, so kills land mid-epoch and on epoch boundaries.
ARGS = ["--steps", "32", "--ckpt-every", "4", "--train-size", "512", "--seed", "3"]
STEP_LINE = re.compile(r"^step (\d+) loss (\S+)$", re.MULTILINE)


@dataclass
class Attempt:
    returncode: int
    output: str
    losses: dict[int, str] = field(default_factory=dict)


def start(workdir: Path, args: list[str], **env: str) -> subprocess.Popen[str]:
    environment = {
        **os.environ,
        "RGT_CKPT_DIR": str(workdir / "ckpt"),
        "RGT_OUTPUT_DIR": str(workdir / "outputs"),
        **env,
    }
    return subprocess.Popen(
        [sys.executable, str(EXAMPLE), *args],
        cwd=workdir,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def finish(proc: subprocess.Popen[str]) -> Attempt:
    assert proc.stdout is not None
    output = proc.stdout.read()
    attempt = Attempt(proc.wait(timeout=300), output)
    attempt.losses = {int(step): loss for step, loss in STEP_LINE.findall(output)}
    return attempt


def run(workdir: Path, args: list[str] = ARGS, **env: str) -> Attempt:
    return finish(start(workdir, args, **env))


def latest_step(workdir: Path) -> int:
    info = Checkpointer(workdir / "ckpt").latest_info()
    return info.step if info else 0


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def forked(zygote: Client, workdir: Path, kill: str = "-") -> Attempt:
    """One attempt in a child of the zygote (no torch import), killed at ``kill``."""
    out = workdir / f"attempt-{len(list(workdir.glob('attempt-*.log'))) + 1}.log"
    code = zygote.send(workdir, out, kill, *ARGS)
    output = out.read_text()
    return Attempt(code, output, {int(step): loss for step, loss in STEP_LINE.findall(output)})


def resumed_from(attempt: Attempt) -> int:
    match = re.search(r"^resumed from step (\d+)$", attempt.output, re.MULTILINE)
    return int(match.group(1)) if match else 0


@pytest.mark.slow
@pytest.mark.early
def test_kills_at_the_risky_points_resume_bit_identical(tmp_path: Path) -> None:
    """kill -9 inside save 2's data write (a torn file: resume from step 4, redo the epoch
    boundary at 8), right after the next attempt's save 2 is committed (step 12, mid-epoch),
    and between saves two steps past an epoch boundary (step 18); then the run finishes."""
    reference_dir, killed_dir = tmp_path / "reference", tmp_path / "killed ü $(x)"
    reference_dir.mkdir()
    killed_dir.mkdir()
    reference_proc = start(reference_dir, ARGS)  # a fresh interpreter, alongside the chain
    zygote = Client(ZYGOTE)
    try:
        kills = ["persist:2", "after-save:2", "step:18", "-"]
        attempts = [forked(zygote, killed_dir, kill) for kill in kills]
    finally:
        zygote.close()
    reference = finish(reference_proc)

    assert reference.returncode == 0, reference.output[-2000:]
    assert [a.returncode for a in attempts] == [-signal.SIGKILL] * 3 + [0], attempts[-1].output
    assert sorted(reference.losses) == list(range(1, 33))
    assert min(attempts[0].losses) == 1 and max(attempts[0].losses) >= 8  # saving step 8
    assert [resumed_from(a) for a in attempts[1:3]] == [4, 12]
    assert 12 <= resumed_from(attempts[3]) <= 16 and max(attempts[2].losses) == 18
    for attempt in attempts:  # every step trained, first time or again, has the same loss
        assert attempt.losses and all(reference.losses[s] == v for s, v in attempt.losses.items())
    final = Checkpointer(killed_dir / "ckpt").latest_info()
    expected = Checkpointer(reference_dir / "ckpt").latest_info()
    assert final is not None and expected is not None and final.step == expected.step == 32
    assert final.state_digest == expected.state_digest
    for name in ("model.safetensors", "metrics.jsonl"):
        assert sha(killed_dir / "outputs" / name) == sha(reference_dir / "outputs" / name)


@pytest.mark.slow
def test_smoke_mode_two_batches_and_results_json(tmp_path: Path) -> None:
    # RGT_SMOKE=1: two batches, a checkpoint after each; `rgt smoke` kills after the first.
    dead = run(tmp_path, [], RGT_SMOKE="1", RGT_SMOKE_KILL_AFTER_SAVE="1")
    assert dead.returncode == -signal.SIGKILL and sorted(dead.losses) == [1]
    resumed = run(tmp_path, [], RGT_SMOKE="1", RGT_ATTEMPT="2")
    assert resumed.returncode == 0 and sorted(resumed.losses) == [2], resumed.output
    records = sorted(p.name for p in (tmp_path / "ckpt").glob("ckpt-*.json"))
    assert records == ["ckpt-000000000001.json", "ckpt-000000000002.json"]
    killed = tmp_path
    results = json.loads((killed / "outputs" / "results.json").read_text())
    assert results["schema"] == "rgt.results/1" and results["smoke"] is True
    assert results["steps"] == 2 and results["attempts"] == 2 and results["seed"] == 0
    assert set(results["data"]) == {"train", "val"}
    assert results["metrics"]["val_accuracy"]["direction"] == "max"
    assert results["metrics"]["val_loss"]["direction"] == "min"
    for artifact in results["artifacts"]:
        path = killed / "outputs" / artifact["path"]
        assert sha(path) == artifact["sha256"] and path.stat().st_size == artifact["bytes"]


@pytest.mark.slow
def test_sigterm_saves_once_and_dies_by_the_signal(tmp_path: Path) -> None:
    proc = start(tmp_path, ["--steps", "100000", "--ckpt-every", "100000", "--train-size", "512"])
    assert proc.stdout is not None
    seen = 0
    for line in proc.stdout:
        match = STEP_LINE.match(line.strip())
        if match and int(match.group(1)) == 3:
            proc.send_signal(signal.SIGTERM)
        if match:
            seen = int(match.group(1))
    assert proc.wait(timeout=120) == -signal.SIGTERM
    info = Checkpointer(tmp_path / "ckpt").latest_info()
    assert info is not None and info.step == seen >= 3  # the step it stopped at, saved
