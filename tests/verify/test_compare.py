"""`rgt verify compare` on run directories written with results.json: verdicts, every bug
trigger, the config diff, and bad inputs."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from rgt.errors import SpecError, UsageError
from rgt.results import write_results
from rgt.verify.compare import compare
from rgt.verify.directions import registry_direction

BASE_CONFIG = {"model": {"depth": 4}, "lr": 0.001, "output_dir": "x"}


def write_group(
    root: Path, name: str, values: Sequence[float], metric: str = "psnr", **extra: Any
) -> str:
    config = {**BASE_CONFIG, **extra.pop("config", {})}
    for seed, value in enumerate(values):
        run = root / f"{name}-s{seed}"
        run.mkdir(parents=True)
        metric_value = extra.pop("metric_value", None) or value
        record = {
            "name": name,
            "seed": seed,
            "steps": 1000,
            "metrics": {metric: metric_value},
            "config": {**config, "seed": seed, "output_dir": str(run)},
        }
        record.update({k: v(seed) if callable(v) else v for k, v in extra.items()})
        write_results(run, record)
    return str(root / f"{name}-s*")


BASE = [30.0, 30.2, 29.9, 30.1, 30.05]
BETTER = [31.0, 31.3, 30.9, 31.2, 31.1]


def test_effect_with_direction_mde_and_single_changed_key(tmp_path: Path) -> None:
    a = write_group(tmp_path, "base", BASE)
    b = write_group(tmp_path, "aug", BETTER, config={"augment": True})
    result = compare(a, b, "psnr")
    assert (result.verdict, result.direction, result.n_a, result.n_b) == ("effect", "max", 5, 5)
    assert result.delta == pytest.approx(sum(BETTER) / 5 - sum(BASE) / 5)
    assert result.ci[0] > 0 and result.p_value < 0.05
    assert 0 < result.mde < result.delta and result.seeds_needed is not None
    assert result.changed_keys == ("augment",)
    assert "B is better than A" in result.explanation
    assert not [f for f in result.findings if f.severity != "info"]


def test_noise_is_inconclusive_and_sesoi_gives_no_meaningful_effect(tmp_path: Path) -> None:
    a = write_group(tmp_path, "base", BASE)
    b = write_group(tmp_path, "same", [30.1, 29.95, 30.15, 30.0, 30.05], config={"wd": 0.1})
    assert compare(a, b, "psnr").verdict == "inconclusive"
    assert compare(a, b, "psnr", sesoi=0.5).verdict == "no_meaningful_effect"


def test_lower_is_better_reads_a_drop_as_an_improvement(tmp_path: Path) -> None:
    a = write_group(tmp_path, "base", [0.50, 0.52, 0.49], metric="val_loss")
    b = write_group(tmp_path, "new", [0.40, 0.41, 0.39], metric="val_loss")
    result = compare(a, b, "val_loss")
    assert (result.verdict, result.direction) == ("effect", "min")
    assert "B is better" in result.explanation


def test_unknown_direction_gives_numbers_but_no_verdict(tmp_path: Path) -> None:
    a = write_group(tmp_path, "base", BASE, metric="widgets")
    b = write_group(tmp_path, "new", BETTER, metric="widgets")
    result = compare(a, b, "widgets")
    assert result.verdict == "unknown_direction" and result.p_value < 0.05
    assert compare(a, b, "widgets", direction="min").verdict == "effect"


@pytest.mark.parametrize(
    "metric, direction",
    [
        ("val/top1_acc", "max"),
        ("test_PSNR", "max"),
        ("ms-ssim", "max"),
        ("mAP50", "max"),
        ("eval-loss", "min"),
        ("top1_error", "min"),
        ("LPIPS", "min"),
        ("fid50k", "min"),
        ("perplexity", "min"),
        ("throughput", None),
        ("acc_minus_loss", None),
    ],
)
def test_direction_registry(metric: str, direction: str | None) -> None:
    assert registry_direction(metric) == direction


def bug_probes(tmp_path: Path, a: str, b: str, metric: str = "psnr") -> set[str]:
    result = compare(a, b, metric)
    assert result.verdict == "suspect_bug", result.explanation
    return {f.kind for f in result.findings if f.severity == "bug"}


def test_trigger_zero_spread(tmp_path: Path) -> None:
    a = write_group(tmp_path, "base", BASE[:3])
    b = write_group(tmp_path, "aug", [31.0, 31.0, 31.0])
    assert bug_probes(tmp_path, a, b) == {"zero_spread"}


def test_trigger_impossible_ssim_and_mixed_accuracy_scale(tmp_path: Path) -> None:
    a = write_group(tmp_path, "base", [0.90, 0.91, 0.92], metric="ssim")
    b = write_group(tmp_path, "aug", [0.95, 1.02, 0.97], metric="ssim")
    assert bug_probes(tmp_path, a, b, "ssim") == {"impossible_value"}
    c = write_group(tmp_path, "pct", [91.0, 92.0, 93.0], metric="accuracy")
    d = write_group(tmp_path, "frac", [0.91, 0.92, 0.93], metric="accuracy")
    assert "impossible_value" in bug_probes(tmp_path, c, d, "accuracy")


def test_percent_accuracy_everywhere_is_fine(tmp_path: Path) -> None:
    a = write_group(tmp_path, "base", [91.0, 92.0, 93.0], metric="accuracy")
    b = write_group(tmp_path, "aug", [93.0, 94.0, 95.0], metric="accuracy")
    result = compare(a, b, "accuracy")
    assert result.verdict != "suspect_bug"
    assert "percent_scale" in {f.kind for f in result.findings}


def test_trigger_delta_far_outside_seed_noise(tmp_path: Path) -> None:
    a = write_group(tmp_path, "base", [30.00, 30.01, 30.02])
    b = write_group(tmp_path, "aug", [40.00, 40.01, 40.02])
    assert bug_probes(tmp_path, a, b) == {"delta_outside_noise"}


def test_trigger_smoke_and_short_runs(tmp_path: Path) -> None:
    a = write_group(tmp_path, "base", BASE[:3])
    b = write_group(tmp_path, "aug", BETTER[:3], smoke=lambda s: s == 0)
    assert bug_probes(tmp_path, a, b) == {"smoke_run"}
    c = write_group(tmp_path, "cut", BETTER[:3], steps=lambda s: 300 if s == 2 else 1000)
    assert bug_probes(tmp_path, a, c) == {"short_run"}


def test_trigger_non_finite_metric(tmp_path: Path) -> None:
    a = write_group(tmp_path, "base", BASE[:3])
    b = write_group(tmp_path, "aug", [31.0, float("nan"), 31.2])
    probes = bug_probes(tmp_path, a, b)
    assert "non_finite" in probes
    assert json.dumps(compare(a, b, "psnr").to_json(), allow_nan=False)


def test_trigger_different_test_data_and_splits(tmp_path: Path) -> None:
    a = write_group(tmp_path, "base", BASE[:3], data={"test": "a" * 64})
    b = write_group(tmp_path, "aug", BETTER[:3], data={"test": "b" * 64})
    assert bug_probes(tmp_path, a, b) == {"data_mismatch"}
    c = write_group(tmp_path, "val", BETTER[:3], metric_value=None)
    for run in Path(tmp_path).glob("val-s*"):
        record = json.loads((run / "results.json").read_text())
        record["metrics"]["psnr"] = {"value": record["metrics"]["psnr"], "split": "val"}
        (run / "results.json").write_text(json.dumps(record))
    assert "split_mismatch" in bug_probes(tmp_path, a, c)


def test_config_diff_flags_more_than_one_change(tmp_path: Path) -> None:
    a = write_group(tmp_path, "base", BASE)
    b = write_group(tmp_path, "aug", BETTER, config={"lr": 0.01, "model": {"depth": 8}})
    result = compare(a, b, "psnr")
    assert result.changed_keys == ("lr", "model.depth")
    (multi,) = [f for f in result.findings if f.kind == "multiple_changes"]
    assert multi.severity == "warning" and "cannot be attributed" in multi.message
    assert multi.evidence["lr"] == {"A": ["0.001"], "B": ["0.01"]}


def test_config_varying_within_a_group_is_reported(tmp_path: Path) -> None:
    a = write_group(tmp_path, "base", BASE[:3], config={"batch": 32})
    b = write_group(tmp_path, "aug", BETTER[:3], config={"batch": 32})
    run = tmp_path / "aug-s1" / "results.json"
    record = json.loads(run.read_text())
    record["config"]["batch"] = 64
    run.write_text(json.dumps(record))
    probes = {f.kind for f in compare(a, b, "psnr").findings}
    assert "config_varies_in_group" in probes


def test_bad_inputs_give_clear_errors(tmp_path: Path) -> None:
    a = write_group(tmp_path, "base", BASE[:3])
    one = write_group(tmp_path, "one", [31.0])
    with pytest.raises(UsageError, match="group B has 1 run"):
        compare(a, one, "psnr")
    with pytest.raises(UsageError, match="has no metric 'ssim'"):
        compare(a, write_group(tmp_path, "other", BETTER[:3]), "ssim")
    with pytest.raises(UsageError, match="in both groups"):
        compare(a, str(tmp_path / "base-s*"), "psnr")
    bad = tmp_path / "bad-s0"
    bad.mkdir()
    (bad / "results.json").write_text(
        json.dumps({"schema": "rgt.results/1", "name": "b", "metrics": {"psnr": "31.0"}})
    )
    with pytest.raises(SpecError) as info:
        compare(a, str(bad), "psnr")
    assert info.value.field == "metrics.psnr"


@pytest.mark.slow
def test_cli_json_document_and_exit_codes(tmp_path: Path) -> None:
    a = write_group(tmp_path, "base run", BASE)
    b = write_group(tmp_path, "aug run", BETTER, config={"augment": True})
    cmd = [sys.executable, "-m", "rgt.cli", "verify", "compare", a, b, "--metric", "psnr"]
    result = subprocess.run([*cmd, "--json"], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert {
        "verdict",
        "delta",
        "ci",
        "p_value",
        "mde",
        "seeds_needed",
        "n_a",
        "n_b",
        "direction",
        "changed_keys",
        "findings",
    } <= set(data)
    assert data["verdict"] == "effect" and data["changed_keys"] == ["augment"]
    human = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert human.stdout.startswith("effect") and "minimum detectable effect" in human.stdout
    missing = subprocess.run([*cmd[:-1], "ssim"], capture_output=True, text=True, check=False)
    assert missing.returncode == 2 and "fix:" in missing.stderr


@pytest.mark.slow
def test_runs_sharing_a_seed_are_not_replications(tmp_path: Path) -> None:
    # Five "seeds" that are all seed 0: a config that ignored --seed, or one run copied.
    a = write_group(tmp_path, "base", BASE, seed=0, config={"seed": 0})
    b = write_group(tmp_path, "aug", BETTER, seed=0, config={"seed": 0, "augment": True})
    result = compare(a, b, "psnr")
    assert result.verdict == "suspect_bug"
    dupes = [f for f in result.findings if f.kind == "duplicate_seed"]
    assert [f.severity for f in dupes] == ["bug", "bug"]
    assert "seed 0 (5 runs)" in dupes[0].message and "not independent" in dupes[0].message
    assert dupes[0].evidence == {"duplicated_seeds": [0], "independent_seeds": 1, "runs": 5}
    cli = subprocess.run(
        [sys.executable, "-m", "rgt.cli", "verify", "compare", a, b, "--metric", "psnr"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "seed 0 (5 runs)" in cli.stdout + cli.stderr
