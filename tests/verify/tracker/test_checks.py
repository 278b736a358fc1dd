"""The checks over real tracker data: exactly the planted defects, nothing on clean runs."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from rgt.results import write_results
from rgt.verify.tracker import scan
from rgt.verify.tracker.names import mismatches, name_claims
from rgt.verify.tracker.record import Point, TrackedRun
from rgt.verify.tracker.scan import SOURCES, TrackerReport

HOUR = 3600.0


def found(report: TrackerReport) -> set[tuple[str, str]]:
    """(probe, run name) for every finding; duplicates list each run."""
    pairs = set()
    for finding in report.findings:
        for label in finding.runs:
            source, _, rest = label.partition(":")
            if source not in SOURCES:  # a results.json folder, not a tracked run
                continue
            name = rest.rsplit(" (", 1)[0]
            pairs.add((finding.kind, name))
    return pairs


def latest(report: TrackerReport) -> float:
    return max(run.last_activity or 0 for run in report.runs)


@pytest.mark.parametrize(
    ("folder", "expected"),
    [
        (
            "mlflow",
            {
                ("duplicate_run", "clean"),
                ("duplicate_run", "clean-again"),
                ("name_config_mismatch", "lr=0.1-seed1"),
                ("truncated_history", "short"),
                ("nan_at_end", "diverged"),
                ("failed_run", "failed"),
                ("stale_running", "killed"),
            },
        ),
        (
            "tensorboard",
            {
                ("name_config_mismatch", "lr=0.1"),
                ("nan_at_end", "diverged"),
                ("summary_mismatch", "summary-off"),
                ("truncated_history", "short"),
            },
        ),
        (
            "wandb",
            {
                ("duplicate_run", "clean"),
                ("duplicate_run", "clean-again"),
                ("summary_mismatch", "summary-off"),
                ("failed_run", "failed"),
                ("name_config_mismatch", "bs64"),
                ("stale_running", "killed"),
            },
        ),
        (
            "trackio",
            {
                ("duplicate_run", "clean"),
                ("duplicate_run", "clean-again"),
                ("name_config_mismatch", "lr3e-4"),
                ("truncated_history", "short"),
            },
        ),
    ],
)
@pytest.mark.slow
def test_exactly_the_planted_defects(
    corpus: Path, folder: str, expected: set[tuple[str, str]]
) -> None:
    first = scan(corpus / folder)
    report = scan(corpus / folder, now=latest(first) + 2 * HOUR)
    assert found(report) == expected


@pytest.mark.slow
def test_severities_follow_the_status(corpus: Path) -> None:
    report = scan(corpus / "trackio")
    truncated = [f for f in report.findings if f.kind == "truncated_history"]
    assert [f.severity for f in truncated] == ["warning"]  # trackio has no status to contradict
    mlflow = scan(corpus / "mlflow")
    short = [f for f in mlflow.findings if f.kind == "truncated_history"]
    assert [f.severity for f in short] == ["bug"]  # FINISHED at 3 of 10 epochs
    assert short[0].evidence == {"reached": 3, "configured": 10, "unit": "epochs",
                                 "status": "finished"}  # fmt: skip


def test_stale_after_is_the_users_threshold(corpus: Path) -> None:
    killed = next(r for r in scan(corpus / "wandb").runs if r.name == "killed")
    last = killed.last_activity
    assert last is not None
    quiet = scan(corpus / "wandb", now=last + 30 * 60, stale_after=HOUR)
    assert ("stale_running", "killed") not in found(quiet)
    stale = scan(corpus / "wandb", now=last + 30 * 60, stale_after=10 * 60)
    assert ("stale_running", "killed") in found(stale)


@pytest.mark.slow
def test_results_json_that_disagrees_with_the_tracker(corpus: Path, tmp_path: Path) -> None:
    write_results(tmp_path, {"name": "clean", "metrics": {"loss": 0.2}})
    report = scan(corpus / "trackio", results=[_load(tmp_path)])
    mismatch = [f for f in report.findings if f.kind == "results_mismatch"]
    assert len(mismatch) == 1 and mismatch[0].evidence["results"] == 0.2
    write_results(tmp_path, {"name": "clean", "metrics": {"loss": 0.25}})
    agreeing = scan(corpus / "trackio", results=[_load(tmp_path)])
    assert not [f for f in agreeing.findings if f.kind == "results_mismatch"]


def test_results_json_found_next_to_the_run_it_describes(tmp_path: Path) -> None:
    run_dir = tmp_path / "runs" / "a"
    run_dir.mkdir(parents=True)
    write_results(run_dir, {"name": "not-the-tracker-name", "metrics": {"acc": 0.9}})
    _write_trackio_db(run_dir / "local.db", [(0, {"acc": 0.5}), (1, {"acc": 0.7})])
    report = scan(tmp_path)
    assert found(report) == {("results_mismatch", "trained")}


def _load(path: Path):  # type: ignore[no-untyped-def]
    from rgt.results import load_results

    return load_results(path)


def _write_trackio_db(path: Path, rows: list[tuple[int, dict[str, float]]]) -> None:
    """A trackio database in trackio's schema (the writer subprocess is slow; the format is not)."""
    import json
    import sqlite3

    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE configs (id INTEGER PRIMARY KEY, run_id TEXT, run_name TEXT, "
                 "config TEXT, created_at TEXT)")  # fmt: skip
    conn.execute("CREATE TABLE metrics (id INTEGER PRIMARY KEY, run_id TEXT, timestamp TEXT, "
                 "run_name TEXT, step INTEGER, metrics TEXT)")  # fmt: skip
    conn.execute("INSERT INTO configs VALUES (1, 'r1', 'trained', '{}', '2026-01-01T00:00:00')")
    for step, values in rows:
        conn.execute(
            "INSERT INTO metrics (run_id, timestamp, run_name, step, metrics) VALUES "
            "('r1', '2026-01-01T00:00:00+00:00', 'trained', ?, ?)",
            (step, json.dumps(values)),
        )
    conn.commit()
    conn.close()


def test_missing_reader_library_is_disclosed_not_fatal(
    corpus: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "mlflow", None)  # as if mlflow-skinny were not installed
    monkeypatch.setitem(sys.modules, "mlflow.entities", None)
    monkeypatch.setitem(sys.modules, "mlflow.tracking", None)
    report = scan(corpus)
    unread = [f for f in report.findings if f.kind == "tracker_unread"]
    assert len(unread) == 1 and "mlflow-skinny" in unread[0].message
    assert report.sources["mlflow"]["runs"] == 0
    assert {r.source for r in report.runs} == {"tensorboard", "wandb", "trackio"}


def test_duplicates_need_the_same_seed_and_stay_within_one_tracker() -> None:
    def run(source: str, seed: int) -> TrackedRun:
        return TrackedRun(source, f"{source}{seed}", "r", "finished", "/x",
                          config={"lr": 0.1, "seed": seed})  # fmt: skip

    from rgt.verify.tracker.checks import duplicates

    assert duplicates([run("wandb", 0), run("wandb", 1)]) == []
    assert duplicates([run("wandb", 0), run("tensorboard", 0)]) == []  # one run, two loggers
    assert len(duplicates([run("wandb", 0), run("wandb", 0)])) == 1


def test_running_run_summary_ahead_of_its_history_is_not_a_mismatch() -> None:
    from rgt.verify.tracker.checks import summary_mismatch

    history = {"loss": (Point(0, 1.0), Point(1, 0.5))}
    alive = TrackedRun("wandb", "a", "a", "running", "/x", summary={"loss": 0.4}, history=history)
    done = TrackedRun("wandb", "a", "a", "finished", "/x", summary={"loss": 0.4}, history=history)
    assert summary_mismatch(alive) == []
    assert [f.kind for f in summary_mismatch(done)] == ["summary_mismatch"]


@pytest.mark.parametrize(
    ("name", "claims"),
    [
        ("lr=0.1-seed1", {"lr": "0.1", "seed": "1"}),
        ("resnet50-lr3e-4-bs64", {"resnet": "50", "lr": "3e-4", "bs": "64"}),
        ("opt=adam-lr=0.1", {"opt": "adam", "lr": "0.1"}),
        ("lr_0.001 wd1e-5", {"lr": "0.001", "wd": "1e-5"}),
        ("bs64seed1", {"bs": "64", "seed": "1"}),
        ("baseline", {}),
    ],
)
def test_name_tokens(name: str, claims: dict[str, str]) -> None:
    assert name_claims(name) == claims


def test_name_mismatch_uses_aliases_and_dotted_keys() -> None:
    config = {"optim.learning_rate": 3e-4, "batch_size": 32, "resnet_depth": 50}
    assert mismatches("resnet50-lr3e-4-bs64", config) == {"batch_size": ("64", 32)}
    assert mismatches("opt=adam", {"opt": "SGD"}) == {"opt": ("adam", "SGD")}
    assert mismatches("lr=1e-3", {"lr": 0.001}) == {}
