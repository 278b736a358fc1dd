"""Each reader turns real tracker files into the same TrackedRun record."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from rgt.verify.tracker import TrackedRun, scan
from rgt.verify.tracker.scan import discover
from tests.verify.tracker.writers import CONFIG, LOSSES, WANDB_KILLED_ROWS


def runs_by_name(path: Path, source: str) -> dict[str, TrackedRun]:
    report = scan(path)
    return {run.name: run for run in report.runs if run.source == source}


def test_discover_finds_each_kind_once(corpus: Path) -> None:
    found = discover(corpus)
    assert [p.name for p in found.units["mlflow"]] == ["mlruns"]
    assert len(found.units["wandb"]) == 6
    assert len(found.units["trackio"]) == 1
    # add_hparams' timestamped child folders are found too; the reader folds them in
    assert len(found.units["tensorboard"]) == 10


def test_mlflow_status_params_and_history(corpus: Path) -> None:
    runs = runs_by_name(corpus / "mlflow", "mlflow")
    assert set(runs) == {"clean", "clean-again", "lr=0.1-seed1", "short", "diverged",
                         "failed", "killed"}  # fmt: skip
    clean = runs["clean"]
    assert (clean.status, clean.config, clean.seed) == ("finished", CONFIG, 0)
    assert [p.value for p in clean.history["loss"]] == list(LOSSES)
    assert clean.summary["loss"] == LOSSES[-1] and clean.end_time is not None
    assert (runs["failed"].status, runs["failed"].raw_status) == ("failed", "FAILED")
    killed = runs["killed"]  # SIGKILL skipped end_run: the store still says RUNNING
    assert (killed.status, killed.end_time, killed.seed) == ("running", None, 5)
    assert math.isnan(runs["diverged"].history["loss"][-1].value)


def test_tensorboard_hparams_folded_into_their_run(corpus: Path) -> None:
    runs = runs_by_name(corpus / "tensorboard", "tensorboard")
    assert set(runs) == {"clean", "lr=0.1", "diverged", "summary-off", "short"}
    clean = runs["clean"]
    assert clean.config == {**CONFIG, "steps": 3}
    assert clean.status == "finished" and clean.raw_status == "hparams session SUCCESS"
    assert [p.step for p in clean.history["train/loss"]] == [0, 1, 2]
    assert clean.summary == {"train/loss": pytest.approx(LOSSES[-1])}
    assert runs["summary-off"].summary == {"train/loss": pytest.approx(0.77)}


def test_wandb_offline_log_read_record_by_record(corpus: Path) -> None:
    runs = runs_by_name(corpus / "wandb", "wandb")
    assert set(runs) == {"clean", "clean-again", "summary-off", "failed", "bs64", "killed"}
    clean = runs["clean"]
    assert (clean.status, clean.raw_status, clean.config) == ("finished", "exit code 0", CONFIG)
    assert [p.value for p in clean.history["loss"]] == list(LOSSES)
    assert [p.step for p in clean.history["loss"]] == [0, 1, 2]
    assert runs["summary-off"].summary["loss"] == 0.123
    assert (runs["failed"].status, runs["failed"].raw_status) == ("failed", "exit code 1")


def test_wandb_killed_run_has_no_exit_record(corpus: Path) -> None:
    killed = runs_by_name(corpus / "wandb", "wandb")["killed"]
    assert (killed.status, killed.raw_status, killed.end_time) == (
        "running",
        "no exit record",
        None,
    )
    logged = len(killed.history["loss"])
    # wandb-core writes whole 32 KiB blocks: whether the unfinished last block reached the disk
    # before the kill depends on timing, so only "some rows, in order" is certain.
    assert 0 < logged <= WANDB_KILLED_ROWS
    assert [p.step for p in killed.history["loss"]] == list(range(logged))


def test_trackio_database_read_without_trackio(corpus: Path) -> None:
    runs = runs_by_name(corpus / "trackio", "trackio")
    assert set(runs) == {"clean", "clean-again", "lr3e-4", "short"}
    clean = runs["clean"]
    assert (clean.status, clean.config, clean.seed) == ("unknown", CONFIG, 0)
    assert [(p.step, p.value) for p in clean.history["loss"]] == list(enumerate(LOSSES))
    assert clean.start_time is not None and clean.path.endswith("#" + clean.run_id)


def test_torn_wandb_log_stops_at_the_tear(corpus: Path, tmp_path: Path) -> None:
    from rgt.verify.tracker._wandb import records

    log = next((corpus / "wandb").rglob("run-*.wandb"))
    data = log.read_bytes()
    whole = list(records(data))
    assert len(whole) > 5
    torn = data[:7] + data[7:200] + b"\x00garbage" + data[208:]
    assert 0 < len(list(records(torn))) < len(whole)
    assert list(records(b"not a wandb log")) == []
