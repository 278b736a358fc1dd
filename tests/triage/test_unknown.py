"""An honest ``unknown``: the lines that looked most like a failure, the nearest label, a score."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path

import pytest

from rgt.triage import classify
from rgt.triage.nearest import suspects
from tests import clirun

_rgt = partial(clirun.rgt, "triage", timeout=60)

NOISE = "\n".join(f"step {i} loss 0.{i:02d} lr 3e-4" for i in range(40))


def test_unknown_names_the_suspect_lines_and_the_nearest_label() -> None:
    after = "\n".join(f"teardown {i}" for i in range(12))
    # A near miss no rule claims (a job "exceeded its memory limit" is host_oom's own family).
    line = "slurmstepd: error: job 5 memory usage high, process was killed"
    verdict = classify(NOISE + "\n" + line + "\n" + after, exit_code=1)
    assert verdict.label == "unknown" and not verdict.retryable
    assert verdict.suspects == [line]
    assert verdict.nearest is not None and verdict.nearest.label == "host_oom"
    assert 0 < verdict.nearest.score < 1
    assert "nearest label: host_oom" in verdict.cause
    # The suspect line leads the evidence even when the log ran on after it.
    assert verdict.evidence[0] == verdict.suspects[0] and verdict.evidence[-1] == "teardown 11"


def test_nearest_follows_the_words_not_the_order_of_the_rules() -> None:
    hang = classify(NOISE + "\nrank 3: collective timed out, watchdog aborting\n", exit_code=1)
    limit = classify(NOISE + "\nERROR: walltime reached, job cancelled by scheduler\n")
    assert hang.nearest is not None and hang.nearest.label == "nccl"
    assert limit.nearest is not None and limit.nearest.label == "preempted"


def test_suspects_rank_by_failure_words_and_keep_log_order() -> None:
    lines = ["ok", "error: a", "fatal error: killed b", "fine", "error: c"]
    assert suspects("\n".join(lines), count=2) == ["fatal error: killed b", "error: c"]


def test_a_quiet_log_has_no_suspects_and_no_nearest_label() -> None:
    verdict = classify(NOISE + "\n", exit_code=1)
    assert verdict.label == "unknown" and verdict.suspects == [] and verdict.nearest is None


@pytest.mark.slow  # two rgt processes: > 1 s on two cores
def test_json_and_text_of_an_unknown_carry_suspects_and_nearest(tmp_path: Path) -> None:
    log = tmp_path / "attempt-1.log"
    log.write_text(NOISE + "\nworker 2 aborted: peer lost during allreduce\n", encoding="utf-8")
    out = _rgt(str(log), "--exit-code", "1", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["label"] == "unknown"
    assert data["suspects"] == ["worker 2 aborted: peer lost during allreduce"]
    assert set(data["nearest"]) == {"label", "rule_id", "score"}
    text = _rgt(str(log), "--exit-code", "1").stdout
    assert f"nearest label: {data['nearest']['label']}" in " ".join(text.split())
    assert "worker 2 aborted: peer lost during allreduce" in text
