"""Integrity probes on real files: leakage by content hash, collapse, shuffled-input gap."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rgt.errors import UsageError
from rgt.verify.probes import collapse, leakage, read_hash_list, shuffled_gap


def hashes(start: int, stop: int) -> list[str]:
    return [hashlib.sha256(str(i).encode()).hexdigest() for i in range(start, stop)]


def test_leakage_from_hash_lists_with_examples(tmp_path: Path) -> None:
    (tmp_path / "train.txt").write_text("\n".join(hashes(0, 1000)) + "\n")
    (tmp_path / "test.txt").write_text("# test split\n" + "\n".join(hashes(995, 1100)) + "\n")
    (finding,) = leakage(
        read_hash_list(tmp_path / "train.txt"), read_hash_list(tmp_path / "test.txt")
    )
    assert (finding.kind, finding.severity) == ("test_leakage", "bug")
    assert finding.evidence["overlap"] == 5 and finding.evidence["distinct"] == 105
    assert finding.evidence["examples"][0]["test"].startswith("line ")


def test_leakage_by_content_of_files_not_names(hostile_dir: Path) -> None:
    (hostile_dir / "train").mkdir()
    (hostile_dir / "test").mkdir()
    (hostile_dir / "train" / "0001.png").write_bytes(b"same pixels")
    (hostile_dir / "train" / "0002.png").write_bytes(b"other pixels")
    (hostile_dir / "test" / "cat 17.png").write_bytes(b"same pixels")
    (hostile_dir / "test" / "0002.png").write_bytes(b"new pixels")
    findings = leakage(read_hash_list(hostile_dir / "train"), read_hash_list(hostile_dir / "test"))
    assert [f.evidence["examples"][0]["test"] for f in findings] == ["cat 17.png"]


def test_no_overlap_and_duplicates_inside_test(tmp_path: Path) -> None:
    (tmp_path / "train.txt").write_text("\n".join(hashes(0, 10)))
    (tmp_path / "test.txt").write_text("\n".join(hashes(10, 20) + hashes(10, 12)))
    findings = leakage(
        read_hash_list(tmp_path / "train.txt"), read_hash_list(tmp_path / "test.txt")
    )
    assert [(f.kind, f.evidence["duplicates"]) for f in findings] == [("test_duplicates", 2)]


@pytest.mark.slow
def test_leakage_on_a_million_hashes(tmp_path: Path) -> None:
    """Exact overlap count at scale (throughput: bench/bench_verify_leakage.py)."""
    lines = [f"{i:064x}" for i in range(1_000_000)]
    (tmp_path / "train.txt").write_text("\n".join(lines))
    (tmp_path / "test.txt").write_text(
        "\n".join(lines[-100_000:] + [f"{i:064x}" for i in range(2_000_000, 2_100_000)])
    )
    (finding,) = leakage(
        read_hash_list(tmp_path / "train.txt"), read_hash_list(tmp_path / "test.txt")
    )
    assert finding.evidence["overlap"] == 100_000


def test_collapse_constant_partial_and_healthy() -> None:
    rng = np.random.default_rng(0)
    assert [f.kind for f in collapse(np.full((50, 8), 0.3))] == ["constant_output"]
    half_dead = np.concatenate([rng.normal(size=(50, 2)), np.ones((50, 6))], axis=1)
    assert [f.kind for f in collapse(half_dead)] == ["partial_collapse"]
    assert collapse(rng.normal(size=(50, 8))) == []
    with pytest.raises(UsageError):
        collapse(np.ones((1, 3)))


def test_shuffled_input_gap() -> None:
    assert [f.kind for f in shuffled_gap(0.101, 0.100)] == ["input_ignored"]
    assert shuffled_gap(0.91, 0.10) == []


def test_cli_leakage_and_collapse(tmp_path: Path) -> None:
    (tmp_path / "train.txt").write_text("\n".join(hashes(0, 10)))
    (tmp_path / "test.txt").write_text("\n".join(hashes(8, 12)))
    np.savez(tmp_path / "preds.npz", logits=np.zeros((20, 4)))
    base = [sys.executable, "-m", "rgt.cli", "verify"]
    leak = subprocess.run(
        [
            *base,
            "leakage",
            "--train",
            str(tmp_path / "train.txt"),
            "--test",
            str(tmp_path / "test.txt"),
            "--json",
        ],
        capture_output=True,
        text=True,
    )
    assert json.loads(leak.stdout)["findings"][0]["evidence"]["overlap"] == 2
    col = subprocess.run(
        [
            *base,
            "collapse",
            str(tmp_path / "preds.npz"),
            "--real-metric",
            "0.5",
            "--shuffled-metric",
            "0.5",
        ],
        capture_output=True,
        text=True,
    )
    assert "constant_output" in col.stdout and "input_ignored" in col.stdout


def test_selection_probe(tmp_path: Path) -> None:
    from rgt.results import find_runs, write_results
    from rgt.verify.selection import selection_findings

    data = {"train": "a" * 64, "val": "b" * 64, "test": "c" * 64}
    runs = {
        "clean": {"metrics": {"acc": {"value": 0.9, "split": "test", "step": 100}}, "data": data},
        "early": {"metrics": {"acc": {"value": 0.9, "split": "test", "step": 60}}, "data": data},
        "best": {"metrics": {"best_test_acc": 0.9}, "data": data},
        "noval": {"metrics": {"acc": 0.9}, "data": {"train": "a" * 64, "test": "c" * 64}},
        "valtest": {"metrics": {"acc": 0.9}, "data": {**data, "val": "c" * 64}},
    }
    for name, record in runs.items():
        (tmp_path / name).mkdir()
        write_results(tmp_path / name, {"name": name, "steps": 100, **record})
    found = {(Path(f.runs[0]).name, f.kind) for f in selection_findings(find_runs(tmp_path))}
    assert found == {
        ("early", "test_selection"),
        ("best", "test_selection"),
        ("noval", "no_validation_split"),
        ("valtest", "validation_is_test"),
    }
