"""`--learn`: learn on one log, the next similar log gets the label; `--rules` counts fires."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from rgt.triage import classify
from rgt.triage.learned import generalize, load_user_rules, propose, save
from rgt.triage.rules import RuleFileError
from tests.agent.conftest import agent_pyz, make_job  # noqa: F401 - the real agent's fixtures

# A failure no bundled rule knows: a vendor's watchdog line.
FIRST = "step 88 loss 1.21\nfabric-agent: FATAL link 3 lost on node gpu-017 (code 0x1f)\n"
NEXT = "step 4051 loss 0.87\nfabric-agent: FATAL link 11 lost on node gpu-203 (code 0x2a)\n"


def _rgt(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "RGT_TRIAGE_RULES"}
    env["RGT_HOME"] = str(home)
    argv = [sys.executable, "-m", "rgt.cli", "triage", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env)


def test_generalized_pattern_matches_the_next_occurrence() -> None:
    line = FIRST.splitlines()[-1]
    import re

    pattern = generalize(line)
    assert re.search(pattern, line) and re.search(pattern, NEXT.splitlines()[-1])
    assert not re.search(pattern, "fabric-agent: FATAL link 3 restored on node gpu-017 (code 0x1f)")


@pytest.mark.slow  # five real `rgt` processes: ~12 s on the shared 2-core machine
def test_learn_round_trip_through_the_cli(tmp_path: Path) -> None:
    home = tmp_path / "home"
    first, second = tmp_path / "first.log", tmp_path / "second.log"
    first.write_text(FIRST)
    second.write_text(NEXT)
    assert json.loads(_rgt(home, str(second), "--json").stdout)["label"] == "unknown"

    learned = _rgt(
        home, str(first), "--learn", "gpu_hw", "--remedy", "move node", "--yes", "--json"
    )
    assert learned.returncode == 0, learned.stderr
    data = json.loads(learned.stdout)
    assert data["saved"] and data["was"] == "unknown" and data["proposed"]["label"] == "gpu_hw"

    verdict = json.loads(_rgt(home, str(second), "--json").stdout)
    assert (verdict["label"], verdict["rule_id"], verdict["remedy"]) == (
        "gpu_hw",
        "learned.1",
        "move node",
    )
    rules = json.loads(_rgt(home, "--rules", "--json").stdout)["rules"]
    by_id = {row["rule_id"]: row for row in rules}
    assert by_id["learned.1"]["learned"] and by_id["learned.1"]["fired"] == 1
    assert not by_id["gpu_hw.xid"]["learned"]


def test_without_yes_nothing_is_stored(tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    log.write_text(FIRST)
    result = _rgt(tmp_path / "home", str(log), "--learn", "gpu_hw", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["saved"] is None
    assert not (tmp_path / "home" / "rules").exists()


def test_relabel_outranks_todays_rule_and_keeps_the_label_retry_default(tmp_path: Path) -> None:
    log = "step 3\nKilled\n"
    today = classify(log, exit_code=137)
    assert today.label == "host_oom"
    from rgt.triage import default_rules

    rule = propose(log, "preempted", today, list(default_rules()))
    winner = next(r for r in default_rules() if r.id == today.rule_id)
    assert rule["priority"] > winner.priority and rule["retryable"] is True
    rule = propose(log, "code_error", today, list(default_rules()))
    assert rule["retryable"] is False


def test_a_learned_rule_may_not_make_a_bug_retryable_silently(tmp_path: Path) -> None:
    rule = propose(FIRST, "code_error", classify(FIRST), [])
    rule["retryable"] = True
    with pytest.raises(RuleFileError):  # refused when written
        save(str(tmp_path), rule)
    (tmp_path / "learned.json").write_text(json.dumps({"family": "learned", "rules": [rule]}))
    with pytest.raises(RuleFileError, match="retryable because"):  # and when loaded
        load_user_rules(str(tmp_path))
    rule["note"] = "retryable because the vendor's license server flaps"
    (tmp_path / "learned.json").write_text(json.dumps({"family": "learned", "rules": [rule]}))
    assert [r.id for r in load_user_rules(str(tmp_path))] == ["learned.1"]


AGENT_JOB = """
    import sys
    print("step 88 loss 1.21", flush=True)
    sys.stderr.write("fabric-agent: FATAL link 7 lost on node gpu-101 (code 0x3c)\\n")
    sys.exit(1)
"""


def test_the_agent_carries_learned_rules_to_the_machine(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    make_job: Any,  # noqa: F811
) -> None:
    from rgt.agent.build import build_agent

    monkeypatch.setenv("RGT_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("RGT_TRIAGE_RULES", raising=False)
    rule = propose(FIRST, "host_oom", classify(FIRST), [], remedy="lower the batch size")
    save(str(tmp_path / "home" / "rules"), rule)
    pyz = build_agent(tmp_path / "agent")
    job = make_job(pyz=pyz).write(AGENT_JOB)
    job.start()
    assert job.finish() == 1, job.agent_log()
    status = job.status()
    assert (status["state"], status["label"]) == ("failed", "host_oom"), status
    assert job.events("attempt_ended")[0]["detail"]["remedy"] == "lower the batch size"
