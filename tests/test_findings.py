"""One finding record and one severity scale for VERIFY, DELIVER, `rgt lint` and `rgt audit`
(``rgt.findings``): every producer builds ``rgt.findings.Finding``, every severity is bug |
warning | info, the older words are read as today's, and each command's JSON reads back into the
same record."""

from __future__ import annotations

import ast
import json
import time
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest

import rgt
from rgt.errors import GateRefused, SpecError
from rgt.findings import SEVERITIES, Finding, Severity, from_json, severity_of
from rgt.lint import lint_paths
from rgt.lint._model import finding_json as lint_json
from rgt.watch import envgate
from rgt.watch.audit import finding, finding_json

SRC = Path(rgt.__file__).parent
BUGGY = """import torch.nn as nn
import torch.nn.functional as F

criterion = nn.CrossEntropyLoss()

def step(model, x, y):
    return criterion(F.softmax(model(x), dim=1), y)
"""


def test_one_scale_and_the_old_words_read_as_today() -> None:
    assert SEVERITIES == ("bug", "warning", "info") == tuple(s.value for s in Severity)
    old = {"error": "bug", "critical": "bug", "warn": "warning", "advice": "info", "note": "info"}
    assert {word: severity_of(word) for word in old} == old
    assert severity_of("BUG") == "bug" and severity_of("loud") is None
    for word in ("error", "warn", "advice"):  # new records speak the one scale only
        with pytest.raises(ValueError, match="severity must be one of"):
            Finding("disk", word, "full")
    assert Finding("disk", Severity.WARNING, "full").severity == "warning"


def test_one_class_named_finding_in_the_source() -> None:
    texts = {path: path.read_text() for path in SRC.rglob("*.py")}
    defined = [
        f"{path.relative_to(SRC)}"
        for path, text in texts.items()
        if "Finding" in text  # parse only the files that could define one
        for node in ast.walk(ast.parse(text, str(path)))
        if isinstance(node, ast.ClassDef) and node.name == "Finding"
    ]
    assert defined == ["findings.py"]


def _severity_words(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, word) of each severity spelled as a constant in a call that builds a finding:
    ``Finding(kind, "bug", …)``/``Finding(severity="bug")`` and audit's ``finding("bug", …)``."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
            continue
        place = {"Finding": 1, "finding": 0, "_finding": 0}.get(node.func.id)
        if place is None:
            continue
        given = [k.value for k in node.keywords if k.arg == "severity"]
        given += node.args[place : place + 1]
        found += [(node.lineno, str(g.value)) for g in given if isinstance(g, ast.Constant)]
    return found


def test_every_producer_spells_a_severity_of_the_one_scale() -> None:
    spelled = {
        f"{path.relative_to(SRC)}:{line}": word
        for path in SRC.rglob("*.py")
        if "inding(" in (text := path.read_text())
        for line, word in _severity_words(ast.parse(text, str(path)))
    }
    assert len(spelled) > 50  # audit, envgate, routes, pythongate, gpu_expect, verify, deliver
    assert {where: w for where, w in spelled.items() if w not in SEVERITIES} == {}
    assert _severity_words(ast.parse('finding("warn", "disk", "full")')) == [(1, "warn")]


def test_an_audit_finding_prints_its_keys_and_reads_back() -> None:
    made = finding("bug", "gpu", "no GPU visible", "check the container", explain="gpu_help")
    printed = finding_json(made)
    assert printed == {
        "severity": "bug",
        "check": "gpu",
        "finding": "no GPU visible",
        "fix": "check the container",
        "explain": "gpu_help",
    }
    read = from_json(printed, "audit.json")
    assert (read.kind, read.severity, read.message, read.fix, read.code) == (
        "gpu", "bug", "no GPU visible", "check the container", "gpu_help",
    )  # fmt: skip
    old = from_json({"severity": "warn", "check": "shm", "finding": "64 MiB", "fix": ""}, "a")
    assert (old.severity, old.kind, old.message) == ("warning", "shm", "64 MiB")


def test_a_lint_finding_is_the_record_with_a_place_and_reads_back(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(BUGGY)
    (found,) = lint_paths([str(script)], cache=False).findings
    assert isinstance(found, Finding) and found.source == "rgt lint"
    assert (found.code, found.severity, found.path, found.line) == ("RGT101", "bug", str(script), 7)
    assert found.fix and found.evidence["catalog"] == "O12"
    printed = lint_json(found)
    assert (printed["name"], printed["why"], printed["catalog"]) == (
        found.kind, found.message, "O12",
    )  # fmt: skip
    read = from_json(json.loads(json.dumps(printed)), "lint.json")
    assert (read.kind, read.message, read.code, read.fix, read.line, read.col) == (
        found.kind, found.message, "RGT101", found.fix, 7, found.col,
    )  # fmt: skip
    assert from_json({**printed, "severity": "advice"}, "old lint.json").severity == "info"


def test_the_full_form_adds_the_optional_fields_only_when_set() -> None:
    plain = Finding("zero_spread", "bug", "every seed gave 0.91", runs=("runs/a/*",))
    assert set(plain.to_json()) == {
        "kind", "severity", "message", "runs", "evidence", "claims", "resolved", "resolution",
        "source",
    }  # fmt: skip
    placed = Finding("x", "info", "m", code="RGT501", fix="f", path="t.py", line=3, col=1)
    assert from_json(placed.to_json(), "f.json") == placed
    with pytest.raises(SpecError, match="'line' must be a whole number"):
        from_json({"kind": "x", "line": "3"}, "f.json")


def test_lint_and_audit_json_are_valid_findings_documents(tmp_path: Path) -> None:
    schema = json.loads(resources.files("rgt").joinpath("schemas/finding.schema.json").read_text())
    script = tmp_path / "train.py"
    script.write_text(BUGGY)
    jsonschema.validate(lint_paths([str(script)], cache=False).to_json(), schema)
    made = finding("bug", "gpu", "no GPU visible", "check the container", explain="gpu_help")
    audit: dict[str, Any] = {"machine": "box", "ok": False, "findings": [finding_json(made)]}
    jsonschema.validate(audit, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"findings": [{"severity": "loud", "check": "gpu"}]}, schema)


def _record(machine: str, findings: list[dict[str, str]], age_s: float = 30) -> None:
    path = envgate.audit_file(machine)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"recorded": time.time() - age_s, "findings": findings}))


@pytest.mark.parametrize("word", ["bug", "error"])  # "error": an audit recorded before
def test_the_environment_gate_refuses_on_a_recorded_bug(word: str) -> None:
    _record("box", [{"severity": word, "check": "gpu", "finding": "no GPU", "fix": "rent"}])
    with pytest.raises(GateRefused, match=r"found 1 bug\(s\)") as refused:
        envgate.check_gate("box", force=False)
    assert refused.value.reasons == ["gpu: no GPU (fix: rent)"]
    assert envgate.check_gate("box", force=True) == [
        "--force: starting despite 1 bug(s) of the audit 30 s ago"
    ]


def test_warnings_and_unreadable_records_do_not_gate() -> None:
    kept = [
        {"severity": "warn", "check": "shm", "finding": "64 MiB", "fix": "--shm-size"},
        {"severity": "warning", "check": "disk", "finding": "91 %", "fix": "free it"},
        {"severity": "loud", "check": "gpu", "finding": "?", "fix": ""},  # a hand edit
        "not a finding",
    ]
    _record("box", kept)  # type: ignore[arg-type]
    assert envgate.check_gate("box", force=False) == []
