"""Artifacts are what the job produced: the default set, --exclude, the caps, declared globs,
and a job that produced nothing."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from rgt.agent import _artifacts
from rgt.agent.paths import JobPaths
from tests.agent.conftest import Job


def manifest(job: Job) -> dict:
    return dict(json.loads(Path(job.paths.manifest).read_text()))


def test_a_job_that_produced_nothing_says_no_artifacts(make_job: Callable[..., Job]) -> None:
    job = make_job().write("print('hi')\n")
    job.start()
    assert job.finish() == 0, job.agent_log()
    assert manifest(job)["files"] == []
    status = job.status()
    assert "no artifacts" in status["reason"] and "verified" not in status["reason"]
    (event,) = job.events("succeeded")
    assert "no artifacts" in event["detail"]["reason"]
    assert event["next"] == "nothing to pull: the job produced no artifacts"
    assert Path(job.paths.done).exists()


def test_success_counts_the_verified_artifacts(make_job: Callable[..., Job]) -> None:
    job = make_job().write("open('result.txt', 'w').write('1')\n")
    job.start()
    assert job.finish() == 0, job.agent_log()
    reason = job.status()["reason"]
    assert reason == "the job exited 0; 1 artifact(s): 1 ok, 0 hash_only, 0 bad"
    (entry,) = manifest(job)["files"]
    assert (entry["verdict"], manifest(job)["verdicts"]) == (
        "ok",
        {"ok": 1, "hash_only": 0, "bad": 0},
    )


EXCLUDING = """
    import os
    for rel in ("wandb/run/log.txt", "data/cifar.bin", "out/model.pt", "out/debug.log",
                "__pycache__/m.cpython-38.pyc"):
        os.makedirs(os.path.dirname(rel), exist_ok=True)
        open(rel, "w").write(rel)
    out = os.environ["RGT_OUTPUT_DIR"]
    open(os.path.join(out, "keep.json"), "w").write("{}")
    os.makedirs(os.path.join(out, "tmp"))
    open(os.path.join(out, "tmp", "scratch.bin"), "w").write("s")
"""


def test_exclude_drops_default_files_and_declared_globs_win(make_job: Callable[..., Job]) -> None:
    job = make_job().write(
        EXCLUDING,
        exclude=("wandb", "*.log", "data/**", "outputs/tmp"),
        artifacts=("data/cifar.bin",),
    )
    job.start()
    assert job.finish() == 0, job.agent_log()
    assert [e["path"] for e in manifest(job)["files"]] == [
        "outputs/keep.json",
        "work/data/cifar.bin",
        "work/out/model.pt",
    ]


@pytest.mark.parametrize(
    ("rel", "pattern", "hit"),
    [
        ("work/a/b/x.log", "*.log", True),
        ("work/wandb/run/f", "wandb", True),
        ("work/data/x", "data/**", True),
        ("work/data/x", "data", True),
        ("work/mydata/x", "data", False),
        ("outputs/tmp/x", "outputs/tmp", True),
        ("outputs/x", "work/outputs", False),
        ("work/out/x.pt", "out/*.pt", True),
        ("ckpt/step-1.pt", "*.pt", True),
    ],
)
def test_exclude_patterns(rel: str, pattern: str, hit: bool) -> None:
    assert _artifacts.excluded(rel, [pattern]) is hit


# 20,000 small files in the cwd (a cache, not results), 30 of them declared.
MANY_FILES = """
    import os
    os.makedirs("cache")
    for n in range(20000):
        open("cache/f-%05d.txt" % n, "w").write("x")
    for n in range(30):
        open("cache/keep-%02d.txt" % n, "w").write("keep")
    open(os.path.join(os.environ["RGT_OUTPUT_DIR"], "metrics.json"), "w").write("{}")
"""


@pytest.mark.slow  # 20,000 files written and walked: ~25 s on 2 busy cores
def test_many_small_files_are_capped_and_nothing_declared_is_lost(
    make_job: Callable[..., Job],
) -> None:
    job = make_job().write(
        MANY_FILES, artifacts=("cache/keep-*.txt",), artifact_caps={"max_files": 100}
    )
    job.start()
    assert job.finish(timeout=180) == 0, job.agent_log()
    doc = manifest(job)
    paths = [e["path"] for e in doc["files"]]
    assert len(paths) == 100 + 30 + 1
    assert all(f"work/cache/keep-{n:02d}.txt" in paths for n in range(30))
    assert "outputs/metrics.json" in paths
    left = doc["left_out"]
    assert left["count"] == 19900 and left["paths"][0] == "work/cache/f-00100.txt"
    assert left["max_files"] == 100 and "--artifact" in left["fix"]
    (event,) = job.events("artifacts_capped")
    assert event["severity"] == "warning" and event["detail"]["count"] == 19900
    assert "19900 more left out" in job.status()["reason"]


def test_byte_cap_leaves_out_what_does_not_fit(tmp_path: Path) -> None:
    paths = JobPaths(str(tmp_path), "j")
    work = Path(paths.work)
    work.mkdir()
    for name, size in (("a.bin", 600), ("b.bin", 600), ("c.bin", 100)):
        (work / name).write_bytes(b"x" * size)
    found = _artifacts.collect(paths, [], caps={"max_bytes": 1000})
    assert found.sorted_found() == ["work/a.bin", "work/c.bin"]
    assert found.left_out["paths"] == ["work/b.bin"] and found.left_out["bytes"] == 600
