"""Checkpoint cadence: due(), the Young and Daly intervals, and the cost of importing rgt.ckpt."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest

from rgt.ckpt import Checkpointer, daly_interval, young_daly_interval
from rgt.errors import UsageError

MINUTE, HOUR = 60.0, 3600.0


def test_young_is_sqrt_two_c_m() -> None:
    assert young_daly_interval(5 * MINUTE, 24 * HOUR) == pytest.approx(120 * MINUTE)
    assert young_daly_interval(2.0, 50.0) == pytest.approx(math.sqrt(200.0))


# Daly (2006), Figs. 3-5: dump time delta = 5 min, restart R = 10 min, Ts = 500 h, and
# M = 24 h, 6 h, 15 min; "the new model predicts tau_opt = 117 min, 57 min, 9.1 min".
@pytest.mark.parametrize(
    ("mtbf", "expected_minutes"),
    [(24 * HOUR, 117.0), (6 * HOUR, 57.0), (15 * MINUTE, 9.1)],
)
def test_daly_reproduces_the_papers_examples(mtbf: float, expected_minutes: float) -> None:
    tau = daly_interval(5 * MINUTE, mtbf) / MINUTE
    assert tau == pytest.approx(expected_minutes, rel=0.01)


def test_daly_checkpoints_once_per_mtbf_when_a_save_costs_more_than_two_mtbf() -> None:
    assert daly_interval(300.0, 100.0) == 100.0
    assert daly_interval(199.0, 100.0) < 200.0


@pytest.mark.parametrize(("cost", "mtbf"), [(0.0, 10.0), (5.0, -1.0), (math.nan, 10.0)])
def test_intervals_reject_non_positive_inputs(cost: float, mtbf: float) -> None:
    with pytest.raises(UsageError):
        young_daly_interval(cost, mtbf)
    with pytest.raises(UsageError):
        daly_interval(cost, mtbf)


def test_due_by_steps(tmp_path: Path) -> None:
    ckpt = Checkpointer(tmp_path, every_steps=5)
    assert [s for s in range(0, 21) if ckpt.due(s)] == [5, 10, 15, 20]


def test_due_by_seconds_counts_from_the_last_save(tmp_path: Path) -> None:
    ckpt = Checkpointer(tmp_path)
    assert ckpt.due(seconds=0.0)
    assert not ckpt.due(seconds=3600.0)
    ckpt_timed = Checkpointer(tmp_path, every_seconds=3600.0)
    assert not ckpt_timed.due(7)
    assert ckpt_timed.due(7, seconds=0.0)


def test_due_without_a_cadence_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError) as caught:
        Checkpointer(tmp_path).due(10)
    assert caught.value.fix and "every_steps" in caught.value.fix


def test_smoke_mode_is_due_every_step(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RGT_SMOKE", "1")
    ckpt = Checkpointer(tmp_path, every_steps=1000)
    assert all(ckpt.due(step) for step in (1, 2, 3))


def test_from_env_prefers_rgt_ckpt_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert Checkpointer.from_env(default_dir=tmp_path / "local").directory == str(
        tmp_path / "local"
    )
    monkeypatch.setenv("RGT_CKPT_DIR", str(tmp_path / "durable"))
    ckpt = Checkpointer.from_env(default_dir=tmp_path / "local", keep_last=1)
    assert ckpt.directory == str(tmp_path / "durable")
    assert ckpt.keep_last == 1
    monkeypatch.delenv("RGT_CKPT_DIR")
    monkeypatch.chdir(tmp_path)
    assert Checkpointer.from_env().directory == "checkpoints"


@pytest.mark.parametrize("bad", [{"mode": "best"}, {"keep_last": 0}])
def test_bad_options_are_usage_errors(tmp_path: Path, bad: dict[str, object]) -> None:
    with pytest.raises(UsageError):
        Checkpointer(tmp_path, **bad)  # type: ignore[arg-type]


def test_importing_rgt_ckpt_loads_no_heavy_library() -> None:
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import rgt.ckpt"],
        capture_output=True,
        text=True,
        check=True,
    )
    imported = {line.split("|")[-1].strip() for line in proc.stderr.splitlines() if "|" in line}
    assert "rgt.ckpt.checkpointer" in imported  # the probe really saw the package import
    heavy = {"torch", "numpy", "scipy", "matplotlib", "httpx", "rich", "click"}
    assert not {name.split(".")[0] for name in imported} & heavy
