"""Triage rules as data: load, validate and compile the JSON rule files.

Each file in ``rules/`` holds one family (``{"family": "memory", "rules": [...]}``) and is listed
in ``rules/index.json``. Files are read with ``pkgutil.get_data`` so the same code works from a
source tree, an installed wheel and the agent's zipapp on a rented machine (Python 3.8, stdlib
only: keep this module free of newer syntax at runtime).

A rule fires when every condition it states holds:

``patterns``               regexes searched line-wise (``re.M``) in the log tail; ``match`` says
                           whether ``any`` (default) or ``all`` of them must occur
``exit_codes``/``signals`` the job's exit status / terminating signal is one of these
``context``                predicates over system readings, ``{"oom_kill_delta": {"gte": 1}}``
``requires_no_traceback``  the tail holds no Python traceback or C++ terminate line (a bare
                           ``Killed`` means the kernel, a traceback means the program itself)
``uncaught_exception``     the log ends with an uncaught Python exception (``exception.py``);
                           its evidence is the user's frame (file:line) and the exception line
``fires_on_success``       the rule may fire for a job that exited 0 (a NaN loss can)
``at_end``                 the patterns must match in the last lines before the log fell silent
                           (``AT_END_LINES`` non-empty lines), not anywhere in the tail
``yields_to``              labels whose rules, when they fire, silence this one entirely
``line_gate``              a regex the rule's patterns are searched behind: only lines it matches
                           are tried (a cheap whole-word test such as ``\bnan\b`` spares costly
                           patterns the many lines that hold their literals in another word);
                           in an ``ignore_case`` rule it is matched on the lower-cased log, so
                           write it in lower case

``priority`` orders the rules that fired: the highest names the root cause, the rest become
secondary labels. Precedence is data, so it is reviewable in one place and pinned by tests.
"""

from __future__ import annotations

import json
import pkgutil
import re
from dataclasses import dataclass
from re import Pattern
from typing import Any

from rgt.triage.labels import LABELS

INDEX = "rules/index.json"
_OPS = ("eq", "ne", "gt", "gte", "lt", "lte", "in", "present")
_KEYS = frozenset(
    (
        "id",
        "label",
        "priority",
        "patterns",
        "match",
        "ignore_case",
        "exit_codes",
        "signals",
        "context",
        "requires_no_traceback",
        "uncaught_exception",
        "fires_on_success",
        "at_end",
        "yields_to",
        "line_gate",
        "retryable",
        "cause",
        "remedy",
        "note",
    )
)


class RuleFileError(ValueError):
    """A rule file is malformed; the message names the file, the rule and the field."""


@dataclass(frozen=True)
class Rule:
    id: str
    label: str
    priority: int
    patterns: tuple[Pattern[str], ...]
    match_all: bool
    exit_codes: tuple[int, ...]
    signals: tuple[int, ...]
    context: tuple[tuple[str, str, Any], ...]
    requires_no_traceback: bool
    uncaught_exception: bool
    fires_on_success: bool
    at_end: bool
    yields_to: tuple[str, ...]
    retryable: bool
    cause: str
    remedy: str
    line_gate: Pattern[str] | None = None

    def context_holds(self, readings: dict[str, Any]) -> bool:
        return all(_predicate(readings, key, op, want) for key, op, want in self.context)


def _predicate(readings: dict[str, Any], key: str, op: str, want: Any) -> bool:
    if key not in readings or readings[key] is None:
        return False
    have = readings[key]
    if op == "present":
        return bool(have) == bool(want)
    if op == "in":
        return bool(have in want)
    try:
        return bool(_COMPARE[op](have, want))
    except TypeError:  # a reading of the wrong type never satisfies a predicate
        return False


_COMPARE = {
    "eq": lambda a, b: a == b,
    "ne": lambda a, b: a != b,
    "gt": lambda a, b: a > b,
    "gte": lambda a, b: a >= b,
    "lt": lambda a, b: a < b,
    "lte": lambda a, b: a <= b,
}


def load_rules(package: str = "rgt.triage") -> list[Rule]:
    """Every rule of every family listed in the index, validated and compiled."""
    index = _read_json(package, INDEX)
    if not isinstance(index, list) or not all(isinstance(name, str) for name in index):
        raise RuleFileError(f"{INDEX}: expected a list of rule file names")
    rules: list[Rule] = []
    for name in index:
        rules.extend(parse_family(_read_json(package, "rules/" + name), name))
    _check_unique(rules)
    return rules


def _read_json(package: str, resource: str) -> Any:
    data = pkgutil.get_data(package, resource)
    if data is None:
        raise RuleFileError(f"{resource}: not found in package {package}")
    try:
        return json.loads(data.decode("utf-8"))
    except ValueError as exc:
        raise RuleFileError(f"{resource}: not valid JSON ({exc})") from exc


def parse_family(doc: Any, source: str) -> list[Rule]:
    """Rules of one family document; ids must live in the family's namespace."""
    if not isinstance(doc, dict) or not isinstance(doc.get("family"), str):
        raise RuleFileError(f"{source}: expected an object with a 'family' name")
    family = doc["family"]
    raw_rules = doc.get("rules")
    if not isinstance(raw_rules, list) or not raw_rules:
        raise RuleFileError(f"{source}: 'rules' must be a non-empty list")
    return [parse_rule(raw, f"{source}[{i}]", family) for i, raw in enumerate(raw_rules)]


def parse_rule(raw: Any, where: str, family: str) -> Rule:
    if not isinstance(raw, dict):
        raise RuleFileError(f"{where}: a rule must be an object")
    unknown = sorted(set(raw) - _KEYS)
    if unknown:
        raise RuleFileError(f"{where}: unknown field(s) {unknown}; allowed: {sorted(_KEYS)}")
    rule_id = _field(raw, "id", str, where)
    where = f"{where} ({rule_id})"
    if not rule_id.startswith(family + "."):
        raise RuleFileError(f"{where}: field 'id' must start with the family name {family!r}.")
    label = _field(raw, "label", str, where)
    if label not in LABELS:
        raise RuleFileError(f"{where}: field 'label' {label!r} is not one of {list(LABELS)}")
    rule = Rule(
        id=rule_id,
        label=label,
        priority=_field(raw, "priority", int, where),
        patterns=_patterns(raw, where),
        match_all=_match_mode(raw, where),
        exit_codes=tuple(_int_list(raw, "exit_codes", where)),
        signals=tuple(_int_list(raw, "signals", where)),
        context=_context(raw.get("context", {}), where),
        requires_no_traceback=_field(raw, "requires_no_traceback", bool, where, False),
        uncaught_exception=_field(raw, "uncaught_exception", bool, where, False),
        fires_on_success=_field(raw, "fires_on_success", bool, where, False),
        at_end=_field(raw, "at_end", bool, where, False),
        yields_to=tuple(_yields(raw, where)),
        retryable=_field(raw, "retryable", bool, where),
        cause=_field(raw, "cause", str, where),
        remedy=_field(raw, "remedy", str, where),
        line_gate=_gate(raw, where),
    )
    if not (
        rule.patterns or rule.exit_codes or rule.signals or rule.context or rule.uncaught_exception
    ):
        raise RuleFileError(
            f"{where}: needs patterns, exit_codes, signals, context or uncaught_exception"
        )
    return rule


def _field(raw: dict[str, Any], key: str, kind: type, where: str, default: Any = None) -> Any:
    value = raw.get(key, default)
    # bool is an int in Python; a priority of `true` is a typo, not a number.
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise RuleFileError(f"{where}: field {key!r} must be a {kind.__name__}, got {value!r}")
    return value


def _patterns(raw: dict[str, Any], where: str) -> tuple[Pattern[str], ...]:
    flags = re.MULTILINE | (re.IGNORECASE if raw.get("ignore_case") else 0)
    compiled = []
    for text in raw.get("patterns", []):
        if not isinstance(text, str) or not text:
            raise RuleFileError(f"{where}: field 'patterns' must hold non-empty strings")
        try:
            compiled.append(re.compile(text, flags))
        except re.error as exc:
            raise RuleFileError(f"{where}: bad regex {text!r} in 'patterns': {exc}") from exc
    return tuple(compiled)


def _gate(raw: dict[str, Any], where: str) -> Pattern[str] | None:
    if "line_gate" not in raw:
        return None
    gate = raw["line_gate"]
    if not isinstance(gate, str) or not gate or not raw.get("patterns"):
        raise RuleFileError(f"{where}: field 'line_gate' must be a non-empty regex, with patterns")
    flags = re.MULTILINE | (re.IGNORECASE if raw.get("ignore_case") else 0)
    try:
        return re.compile(gate, flags)
    except re.error as exc:
        raise RuleFileError(f"{where}: bad regex {gate!r} in 'line_gate': {exc}") from exc


def _match_mode(raw: dict[str, Any], where: str) -> bool:
    mode = raw.get("match", "any")
    if mode not in ("any", "all"):
        raise RuleFileError(f"{where}: field 'match' must be 'any' or 'all', got {mode!r}")
    return bool(mode == "all")


def _int_list(raw: dict[str, Any], key: str, where: str) -> list[int]:
    values = raw.get(key, [])
    if not isinstance(values, list) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in values
    ):
        raise RuleFileError(f"{where}: field {key!r} must be a list of integers")
    return values


def _context(raw: Any, where: str) -> tuple[tuple[str, str, Any], ...]:
    if not isinstance(raw, dict):
        raise RuleFileError(f"{where}: field 'context' must map a reading to {{op: value}}")
    preds: list[tuple[str, str, Any]] = []
    for key, cond in sorted(raw.items()):
        if not isinstance(cond, dict) or not cond or set(cond) - set(_OPS):
            raise RuleFileError(f"{where}: context {key!r} needs operators from {list(_OPS)}")
        preds.extend((key, op, want) for op, want in sorted(cond.items()))
    return tuple(preds)


def _yields(raw: dict[str, Any], where: str) -> list[str]:
    labels = raw.get("yields_to", [])
    if not isinstance(labels, list) or any(label not in LABELS for label in labels):
        raise RuleFileError(f"{where}: field 'yields_to' must list labels from the vocabulary")
    return labels


def _check_unique(rules: list[Rule]) -> None:
    seen: dict[str, Rule] = {}
    for rule in rules:
        if rule.id in seen:
            raise RuleFileError(f"rule id {rule.id!r} is defined twice")
        seen[rule.id] = rule
