"""Rules are data: the packaged files validate, the retry policy holds, bad files are refused."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from rgt.triage import LABEL_RETRYABLE, LABELS, RuleFileError, default_rules, load_rules
from rgt.triage.labels import RETRY_EXCEPTIONS
from rgt.triage.rules import parse_family, parse_rule

RULES_DIR = Path(__file__).parents[2] / "src" / "rgt" / "triage" / "rules"


def test_every_label_has_a_rule_and_ids_are_namespaced_by_file() -> None:
    rules = load_rules()
    assert {rule.label for rule in rules} >= set(LABELS) - {"unknown"}
    index = json.loads((RULES_DIR / "index.json").read_text())
    assert sorted(index) == sorted(
        p.name for p in RULES_DIR.glob("*.json") if p.name != "index.json"
    )
    for name in index:
        family = json.loads((RULES_DIR / name).read_text())
        assert all(rule["id"].startswith(family["family"] + ".") for rule in family["rules"])


def test_rules_are_ranked_by_explicit_priority() -> None:
    priorities = [rule.priority for rule in default_rules()]
    assert priorities == sorted(priorities, reverse=True)
    by_id = {rule.id: rule.priority for rule in default_rules()}
    assert by_id["gpu_hw.xid"] > by_id["distributed.nccl"]
    assert by_id["memory.shm_exhausted"] > by_id["storage.disk_full"]
    assert by_id["storage.corrupt_checkpoint"] > by_id["storage.disk_full"]
    assert by_id["platform.scheduler_end"] > by_id["memory.bare_killed"]


def test_retry_policy_follows_the_label_except_documented_rules() -> None:
    for rule in default_rules():
        if rule.id in RETRY_EXCEPTIONS:
            assert rule.retryable != LABEL_RETRYABLE[rule.label], rule.id
        else:
            assert rule.retryable == LABEL_RETRYABLE[rule.label], rule.id
    retryable = {label for label, ok in LABEL_RETRYABLE.items() if ok}
    assert retryable == {"preempted", "ssh_drop", "gpu_hw"}


def _rule(**over: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "id": "fam.r",
        "label": "cuda_oom",
        "priority": 5,
        "patterns": ["x"],
        "retryable": False,
        "cause": "c",
        "remedy": "r",
    }
    raw.update(over)
    return {k: v for k, v in raw.items() if v is not None}


@pytest.mark.parametrize(
    ("over", "message"),
    [
        ({"colour": "red"}, "unknown field"),
        ({"id": "other.r"}, "'id' must start with"),
        ({"label": "oom"}, "'label'"),
        ({"priority": True}, "'priority' must be a int"),
        ({"patterns": ["(unclosed"]}, "bad regex"),
        ({"match": "some"}, "'match'"),
        ({"context": {"x": {"near": 1}}}, "context 'x'"),
        ({"yields_to": ["nope"]}, "yields_to"),
        ({"exit_codes": ["137"]}, "exit_codes"),
        ({"patterns": None}, "needs patterns"),
        ({"cause": None}, "'cause'"),
    ],
)
def test_a_malformed_rule_is_refused_naming_the_field(over: dict[str, Any], message: str) -> None:
    with pytest.raises(RuleFileError, match=message):
        parse_rule(_rule(**over), "fam.json[0]", "fam")


def test_family_documents_are_checked() -> None:
    with pytest.raises(RuleFileError, match="'family'"):
        parse_family({"rules": []}, "x.json")
    with pytest.raises(RuleFileError, match="non-empty"):
        parse_family({"family": "x", "rules": []}, "x.json")
    assert parse_family({"family": "fam", "rules": [_rule()]}, "fam.json")[0].id == "fam.r"


def test_importing_triage_loads_only_the_standard_library() -> None:
    code = (
        "import sys; before = set(sys.modules); import rgt.triage; rgt.triage.default_rules();"
        "new = {m.split('.')[0] for m in set(sys.modules) - before};"
        "print(sorted(m for m in new if m not in sys.stdlib_module_names and m != 'rgt'))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
