"""results.json (rgt.results/1): schema, loader, errors that name the field, run discovery."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rgt.errors import SpecError, UsageError
from rgt.results import find_runs, load_results, results_schema, write_results


def full_record(seed: int = 0) -> dict[str, Any]:
    return {
        "name": f"unet-s{seed}",
        "created": "2025-01-01T00:00:00Z",
        "seed": seed,
        "config": {"model": {"depth": 4}, "lr": 0.001, "seed": seed},
        "code": {"git_commit": "abc123", "dirty": False, "snapshot": "f" * 16},
        "data": {"train": "a" * 64, "test": "b" * 64},
        "metrics": {
            "psnr": {"value": 31.5, "direction": "max", "split": "test", "step": 900},
            "loss": 0.12,
        },
        "artifacts": [{"path": "ckpt/last.pt", "sha256": "c" * 64, "bytes": 10}],
        "steps": 900,
        "smoke": False,
        "attempts": 1,
    }


def test_round_trip_normalises_metrics(hostile_dir: Path) -> None:
    file = write_results(hostile_dir, full_record(3))
    run = load_results(hostile_dir)
    assert file == hostile_dir / "results.json"
    assert (run.name, run.seed, run.steps, run.smoke) == ("unet-s3", 3, 900, False)
    assert run.metric("psnr").direction == "max" and run.metric("psnr").split == "test"
    assert run.metric("loss").value == 0.12 and run.metric("loss").direction is None
    assert json.loads(file.read_text())["schema"] == "rgt.results/1"


def test_minimal_record_is_valid(tmp_path: Path) -> None:
    write_results(tmp_path, {"name": "x", "metrics": {"acc": 0.9}})
    assert load_results(tmp_path / "results.json").seed is None


@pytest.mark.parametrize(
    "mutate, field",
    [
        (lambda d: d["metrics"]["psnr"].update(direction="up"), "metrics.psnr.direction"),
        (lambda d: d["metrics"].update(acc="0.9"), "metrics.acc"),
        (lambda d: d.update(seed="one"), "seed"),
        (lambda d: d.update(metric={"a": 1}), "<document>"),
        (lambda d: d["artifacts"][0].update(sha256="xyz"), "artifacts.0.sha256"),
        (lambda d: d.pop("name"), "<document>"),
        (lambda d: d.update(steps=-1), "steps"),
        (lambda d: d["code"].update(dirty="no"), "code.dirty"),
    ],
)
def test_malformed_file_names_the_field(tmp_path: Path, mutate: Any, field: str) -> None:
    record = {"schema": "rgt.results/1", **full_record()}
    mutate(record)
    (tmp_path / "results.json").write_text(json.dumps(record))
    with pytest.raises(SpecError) as info:
        load_results(tmp_path)
    assert info.value.field == field
    assert info.value.fix and "results.schema.json" in info.value.fix


def test_wrong_schema_and_broken_json(tmp_path: Path) -> None:
    (tmp_path / "results.json").write_text(json.dumps({**full_record(), "schema": "x/1"}))
    with pytest.raises(SpecError, match="'schema'"):
        load_results(tmp_path)
    (tmp_path / "results.json").write_text('{"name": ')
    with pytest.raises(SpecError, match="not valid JSON"):
        load_results(tmp_path)


def test_missing_metric_lists_the_known_ones(tmp_path: Path) -> None:
    write_results(tmp_path, full_record())
    with pytest.raises(UsageError, match="has: loss, psnr"):
        load_results(tmp_path).metric("ssim")


def test_find_runs_by_dir_of_runs_glob_and_single_run(tmp_path: Path) -> None:
    for variant in ("base", "aug"):
        for seed in range(3):
            run = tmp_path / "runs" / f"{variant}-s{seed}"
            run.mkdir(parents=True)
            write_results(run, full_record(seed))
    assert len(find_runs(tmp_path / "runs")) == 6
    assert [r.seed for r in find_runs(str(tmp_path / "runs" / "aug-*"))] == [0, 1, 2]
    assert len(find_runs(tmp_path / "runs" / "base-s1")) == 1
    with pytest.raises(UsageError, match=r"no results\.json"):
        find_runs(str(tmp_path / "nothing-*"))


def test_schema_ships_in_the_package() -> None:
    assert results_schema()["properties"]["schema"]["const"] == "rgt.results/1"
