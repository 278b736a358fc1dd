"""Small truths of the job verbs, through the real CLI on the local backend: `--` before the
command's options, the probe's log tail, `logs -f`'s exit status, triage of jobs that did not
fail, job-id prefixes and full ids in `status`."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from tests.jobs.test_local_lifecycle import HOSTILE, rgt

CONFIG_DUMP = "".join(f"config.option_{i:03d} = {'x' * 40}\n" for i in range(150))
CRASH = (
    f"print({CONFIG_DUMP!r}, flush=True)\n"
    "print('\\x1b]0;owned title\\x07\\x1b[2Jloading', flush=True)\n"
    "def train(cfg):\n"
    "    return cfg['learning_rate']\n"
    "train({})\n"
)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    proj = tmp_path / HOSTILE / "proj"
    proj.mkdir(parents=True)
    (proj / "ok.py").write_text("print('done', flush=True)\n")
    (proj / "crash.py").write_text(CRASH)
    (proj / "sleep.py").write_text("import time\ntime.sleep(300)\n")
    assert rgt("up", "local", "--name", "box", "--root", str(tmp_path / "root")).returncode == 0
    return proj


def _run(project: Path, script: str, probe: str = "1") -> tuple[int, dict[str, object]]:
    proc = rgt(
        "run", "box", "--probe-seconds", probe, "--json", "--", sys.executable, script,
        cwd=project,
    )  # fmt: skip
    return proc.returncode, json.loads(proc.stdout)


def _common_prefix(a: str, b: str) -> str:
    size = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), len(a))
    return a[:size]


def _wait_ended(job_id: str) -> None:
    assert rgt("watch", job_id, "--interval", "0.3", "--json").returncode in (0, 1)


@pytest.mark.slow
def test_options_after_the_command_without_separator_are_refused(project: Path) -> None:
    proc = rgt("run", "box", sys.executable, "ok.py", "--env", "X=1", "--retries", "0", cwd=project)
    assert proc.returncode == 2
    assert "option '--env' follows the command" in proc.stderr
    assert "without `--`" in proc.stderr and "-- python train.py" in proc.stderr
    as_json = rgt("run", "box", "--json", sys.executable, "ok.py", "--lr", "3", cwd=project)
    assert as_json.returncode == 2
    assert json.loads(as_json.stdout)["error"] == "UsageError"
    assert json.loads(rgt("status", "--json").stdout)["jobs"] == []  # nothing launched


@pytest.mark.slow
def test_options_after_the_separator_belong_to_the_job(project: Path) -> None:
    (project / "args.py").write_text("import sys\nprint('ARGS', sys.argv[1:], flush=True)\n")
    proc = rgt(
        "run", "box", "--retries", "0", "--probe-seconds", "5", "--",
        sys.executable, "args.py", "--retries", "7", "--env", "Y=2",
        cwd=project,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "ARGS ['--retries', '7', '--env', 'Y=2']" in proc.stdout


@pytest.mark.slow
def test_the_probe_shows_the_traceback_not_the_config_dump(project: Path) -> None:
    proc = rgt(
        "run", "box", "--probe-seconds", "30", "--", sys.executable, "crash.py", cwd=project
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    assert "last lines of the log" in proc.stdout
    assert "KeyError: 'learning_rate'" in proc.stdout
    assert "option_000" not in proc.stdout  # the head of the log is not what a failure shows
    assert "loading" in proc.stdout and "\x1b" not in proc.stdout  # no escape reaches the tty
    code, doc = _run(project, "crash.py", probe="30")
    assert code == 1 and "KeyError: 'learning_rate'" in str(doc["log_tail"])


@pytest.mark.slow
def test_logs_follow_exits_with_the_jobs_outcome(project: Path) -> None:
    _, ok = _run(project, "ok.py")
    _, bad = _run(project, "crash.py", probe="30")
    _, sleeper = _run(project, "sleep.py")
    followed = rgt("logs", "-f", str(ok["job_id"]))
    assert followed.returncode == 0 and "done" in followed.stdout
    failed = rgt("logs", "-f", str(bad["job_id"]))
    assert failed.returncode == 1 and "KeyError" in failed.stdout
    assert rgt("logs", str(bad["job_id"])).returncode == 0  # without -f: just the log
    assert rgt("cancel", str(sleeper["job_id"])).returncode == 0
    assert rgt("logs", "-f", str(sleeper["job_id"])).returncode == 1


@pytest.mark.slow
def test_triage_of_jobs_that_did_not_fail(project: Path) -> None:
    _, ok = _run(project, "ok.py")
    _wait_ended(str(ok["job_id"]))
    human = rgt("triage", str(ok["job_id"]))
    assert human.returncode == 0, human.stderr
    assert "nothing to triage" in human.stdout
    assert "unknown" not in human.stdout and "failure" not in human.stdout
    doc = json.loads(rgt("triage", str(ok["job_id"]), "--json").stdout)
    assert (doc["state"], doc["failure"], doc["label"]) == ("succeeded", False, None)

    _, sleeper = _run(project, "sleep.py")
    assert rgt("cancel", str(sleeper["job_id"])).returncode == 0
    _wait_ended(str(sleeper["job_id"]))
    human = rgt("triage", str(sleeper["job_id"]))
    assert "cancelled" in human.stdout and "retry" not in human.stdout.lower()
    assert "preempted" not in human.stdout
    raw = rgt("triage", str(sleeper["job_id"]), "--json").stdout
    doc = json.loads(raw)
    assert (doc["label"], doc["failure"]) == ("cancelled", False)
    assert "retry" not in raw.lower()


@pytest.mark.slow
def test_triage_of_a_failed_job_by_prefix_says_code_error(project: Path) -> None:
    _, bad = _run(project, "crash.py", probe="30")
    job_id = str(bad["job_id"])
    doc = json.loads(rgt("triage", job_id[:-2], "--json").stdout)
    assert (doc["label"], doc["retryable"], doc["job_id"]) == ("code_error", False, job_id)
    assert doc["evidence"][0].endswith("crash.py:4 in train: KeyError: 'learning_rate'")


@pytest.mark.slow
def test_full_ids_in_status_and_unique_prefixes_everywhere(project: Path) -> None:
    ids = [str(_run(project, "ok.py")[1]["job_id"]) for _ in range(2)]
    shared = _common_prefix(*ids)
    assert len(shared) >= len("box-20261201-"), ids  # same day: the stamps share a prefix
    table = rgt("status", env={"COLUMNS": "60"}).stdout
    assert all(job_id in table for job_id in ids), table
    ambiguous = rgt("logs", shared)
    assert ambiguous.returncode == 2
    assert "ambiguous" in ambiguous.stderr and all(i in ambiguous.stderr for i in ids)
    doc = json.loads(rgt("cancel", shared, "--json").stdout)
    assert doc["error"] == "AmbiguousJobError" and sorted(doc["candidates"]) == sorted(ids)
    abandon = rgt("approve", "box", "--abandon", shared)
    assert abandon.returncode == 2 and "ambiguous" in abandon.stderr
    unique = ids[0][: len(shared) + 1] if ids[0][len(shared)] != ids[1][len(shared)] else ids[0]
    assert "done" in rgt("logs", unique).stdout
    one = json.loads(rgt("status", unique, "--json").stdout)["jobs"]
    assert [j["job_id"] for j in one] == [ids[0]]
    assert rgt("watch", unique, "--json").returncode == 0
    assert rgt("logs", "nope-nope").returncode == 2


def test_triage_neutralises_escape_sequences_of_a_log(tmp_path: Path) -> None:
    log = tmp_path / "attempt-1.log"
    hostile = "\x1b]0;owned title\x07\x1b[2J\x1b]52;c;ZXZpbA==\x07\x1bc"
    log.write_text(f"step 3\n{hostile}RuntimeError: CUDA out of memory. {hostile}\n")
    human = rgt("triage", str(log), "--exit-code", "1")
    assert human.returncode == 0, human.stderr
    assert "CUDA out of memory" in human.stdout
    assert "\x1b" not in human.stdout and "\x07" not in human.stdout
    raw = json.loads(rgt("triage", str(log), "--json").stdout)
    assert any("\x1b" in line for line in raw["evidence"])  # JSON keeps the data, escaped


@pytest.mark.slow
def test_logs_follow_reports_success_after_a_wait(project: Path) -> None:
    (project / "slow.py").write_text("import time\ntime.sleep(2)\nprint('late', flush=True)\n")
    _, doc = _run(project, "slow.py")
    start = time.monotonic()
    followed = rgt("logs", "-f", str(doc["job_id"]))
    assert followed.returncode == 0 and "late" in followed.stdout
    assert time.monotonic() - start < 60
