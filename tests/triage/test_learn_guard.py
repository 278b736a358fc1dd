"""Learned rules cannot widen retries: a bare word, a rule that matches another label's known log,
a retryable rule over a log a built-in rule calls a bug, and an old bad rule already on disk."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rgt.triage import classify, load_rules
from rgt.triage.learned import load_user_rules, save
from tests.agent.conftest import agent_pyz, make_job  # noqa: F401 - the real agent's fixtures
from tests.clirun import rgt
from tests.triage.learn_known import SHIPPED, build

# The attack of the issue: a log that ends in the shell's `Killed` (an OOM kill), learned as a
# preemption; an older rgt stored the bare literal `Killed -> preempted, retryable`.
KILLED = "step 3 loss 0.91\nKilled\n"
OLD_BAD_RULE = {
    "id": "learned.1",
    "label": "preempted",
    "priority": 31,
    "patterns": ["Killed"],
    "retryable": True,
    "cause": "learned: the same failure as before (preempted)",
    "remedy": "the remedy recorded when this failure was first understood",
    "note": "learned from a log file",
}


def _learn(tmp_path: Path, log: str, label: str) -> tuple[int, dict[str, Any]]:
    path = tmp_path / "job.log"
    path.write_text(log)
    proc = rgt("triage", str(path), "--learn", label, "--yes", "--json")
    return proc.returncode, json.loads(proc.stdout)


def _stored(home: Path) -> list[Any]:
    path = home / "rules" / "learned.json"
    return json.loads(path.read_text())["rules"] if path.exists() else []


def test_the_shipped_known_logs_are_the_corpus_tails() -> None:
    assert SHIPPED.read_text(encoding="utf-8") == build(), "python -m tests.triage.learn_known"


def test_a_bare_killed_is_never_learned(tmp_path: Path, rgt_home: Path) -> None:
    code, doc = _learn(tmp_path, KILLED, "preempted")
    assert code == 2, doc
    assert "bare one-word literal" in doc["message"] and "'Killed'" in doc["message"]
    assert "several words" in doc["fix"]
    assert _stored(rgt_home) == []


def test_a_learned_rule_never_makes_a_built_in_bug_retryable(
    tmp_path: Path, rgt_home: Path
) -> None:
    # Several words, so not bare: but the built-in bare-kill rule calls this log host_oom.
    log = "step 3\ntrain.sh: line 4: 12345 Killed                  python train.py\n"
    code, doc = _learn(tmp_path, log, "preempted")
    assert code == 2, doc
    assert "memory.bare_killed labels this log host_oom" in doc["message"]
    assert "not retryable" in doc["fix"]
    assert _stored(rgt_home) == []
    code, doc = _learn(tmp_path, log, "host_oom")  # narrowing is fine: it stops retries
    assert code == 0 and doc["saved"], doc


def test_a_rule_that_matches_a_known_log_of_another_label_is_refused(
    tmp_path: Path, rgt_home: Path
) -> None:
    # The user thinks it is a CRLF script; rgt's known logs hold the same line as import_error.
    code, doc = _learn(tmp_path, "step 3\nrun.sh: line 7: python3: command not found\n", "crlf")
    assert code == 2, doc
    assert "import_error/autodl-python3-127 (import_error)" in doc["message"]
    assert "more specific" in doc["fix"]
    assert _stored(rgt_home) == []


def test_a_rule_must_match_its_own_log_and_save_vets_too(tmp_path: Path) -> None:
    from rgt.triage.vetting import RuleRefused, vet

    rule = {**OLD_BAD_RULE, "label": "gpu_hw", "patterns": ["fabric agent lost the link"]}
    with pytest.raises(RuleRefused, match="does not match the log it was learned from"):
        vet(rule, "step 3\nfabric agent: link 4 down\n")
    with pytest.raises(RuleRefused, match="bare one-word"):
        save(str(tmp_path), OLD_BAD_RULE)  # the library path refuses it as the CLI does
    assert not (tmp_path / "learned.json").exists()


def test_an_old_bad_rule_on_disk_cannot_shadow_host_oom(tmp_path: Path) -> None:
    (tmp_path / "learned.json").write_text(
        json.dumps({"family": "learned", "rules": [OLD_BAD_RULE]})
    )
    merged = load_rules() + load_user_rules(str(tmp_path))  # what the agent ships and uses
    for exit_code in (None, 137):
        verdict = classify(KILLED, exit_code, rules=merged)
        assert (verdict.label, verdict.retryable) == ("host_oom", False), verdict
        assert verdict.rule_id == "memory.bare_killed" and "preempted" in verdict.secondary
    # Where no built-in bug fires, the learned rule still decides (it is not thrown away).
    notice = "step 3\nspot notice: instance i-0ab reclaimed, Killed by the platform\n"
    assert classify(notice, rules=merged).rule_id == "learned.1"


def test_the_cli_names_an_old_bad_rule_and_does_not_obey_it(tmp_path: Path, rgt_home: Path) -> None:
    (rgt_home / "rules").mkdir()
    (rgt_home / "rules" / "learned.json").write_text(
        json.dumps({"family": "learned", "rules": [OLD_BAD_RULE]})
    )
    rows = json.loads(rgt("triage", "--rules", "--json").stdout)["rules"]
    old = next(row for row in rows if row["rule_id"] == "learned.1")
    assert "bare one-word literal" in old["refused_today"] and "fix:" in old["refused_today"]
    log = tmp_path / "job.log"
    log.write_text(KILLED)
    verdict = json.loads(rgt("triage", str(log), "--exit-code", "137", "--json").stdout)
    assert (verdict["label"], verdict["retryable"]) == ("host_oom", False)


@pytest.mark.slow  # 450 proposals, each vetted against every known log: ~5 s
def test_no_rule_the_vetting_lets_through_makes_a_known_bug_retryable() -> None:
    """Learn every known log as every other retry-widening label; store what the vetting lets
    through, all together; no known log a built-in rule calls a bug becomes retryable."""
    from rgt.triage.learned import propose
    from rgt.triage.rules import parse_family
    from rgt.triage.vetting import RuleRefused, known_logs, vet

    built_in = load_rules()
    accepted: list[dict[str, Any]] = []
    tried = 0
    for known in known_logs():
        today = classify(known.tail, known.exit_code, known.signal, known.context, built_in)
        for label in ("preempted", "ssh_drop", "gpu_hw"):
            rule = propose(known.tail, label, today, built_in)
            rule["id"] = f"learned.{len(accepted) + 1}"
            tried += 1
            try:
                vet(rule, known.tail, known.exit_code, known.signal, known.context)
            except RuleRefused:
                continue
            accepted.append(rule)
    assert tried > 400 and accepted  # some learning still happens (logs no rule knows)
    merged = built_in + parse_family({"family": "learned", "rules": accepted}, "test")
    widened = []
    for known in known_logs():
        args = (known.tail, known.exit_code, known.signal, known.context)
        before, after = classify(*args, rules=built_in), classify(*args, rules=merged)
        if before.label != "unknown" and not before.retryable and after.retryable:
            widened.append((known.name, after.rule_id))
    assert widened == []


KILLED_JOB = """
    import sys
    print("step 3 loss 0.91", flush=True)
    sys.stderr.write("Killed\\n")  # what a shell wrapper prints when its child was OOM-killed
    sys.exit(137)
"""


@pytest.mark.slow  # a real agent runs a real job
def test_the_agent_does_not_retry_an_oom_kill_under_an_old_bad_rule(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    make_job: Any,  # noqa: F811
) -> None:
    from rgt.agent.build import build_agent

    monkeypatch.setenv("RGT_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("RGT_TRIAGE_RULES", raising=False)
    rules = tmp_path / "home" / "rules"
    rules.mkdir(parents=True)
    (rules / "learned.json").write_text(json.dumps({"family": "learned", "rules": [OLD_BAD_RULE]}))
    pyz = build_agent(tmp_path / "agent")  # ships the old rule, as an older rgt stored it
    job = make_job(pyz=pyz).write(KILLED_JOB)
    job.start()
    assert job.finish() == 1, job.agent_log()
    status = job.status()
    assert (status["state"], status["label"]) == ("failed", "host_oom"), status
    assert len(job.events("attempt_ended")) == 1  # stopped, never restarted as a preemption
