"""Was the test split used to pick the model? Read from what each run logged.

A test number is honest only if nothing was chosen by looking at it. Signs that it was, from a
``results.json``: a test metric recorded at a step other than the last (a "best test epoch"), a
metric named like ``best_test_acc``, or no validation split at all (so selection had nothing
else to read). A validation split whose content hash equals the test split's is no validation.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from rgt.results import RunResults
from rgt.verify.findings import Finding

VAL_SPLITS = ("val", "valid", "validation", "dev")
_TEST = re.compile(r"(^|[^a-z])test([^a-z]|$)")
_BEST = re.compile(r"(^|[^a-z])(best|max|min)([^a-z]|$)")


def _is_test(name: str, split: str | None) -> bool:
    return split == "test" or (split is None and bool(_TEST.search(name.lower())))


def selection_findings(runs: Sequence[RunResults]) -> list[Finding]:
    findings: list[Finding] = []
    for run in runs:
        findings += _test_selected(run)
        findings += _validation_split(run)
    return findings


def _test_selected(run: RunResults) -> list[Finding]:
    found = []
    for metric in run.metrics.values():
        if not _is_test(metric.name, metric.split):
            continue
        early = metric.step is not None and run.steps is not None and metric.step < run.steps
        best = bool(_BEST.search(metric.name.lower()))
        if early or best:
            why = (
                f"recorded at step {metric.step} of {run.steps}"
                if early
                else "its name says it is the best over training"
            )
            found.append(
                Finding(
                    "test_selection",
                    "bug",
                    f"{metric.name} is a test metric {why}: the model was chosen by its test score",
                    (run.label,),
                    {"metric": metric.name, "step": metric.step, "steps": run.steps},
                )
            )
    return found


def _validation_split(run: RunResults) -> list[Finding]:
    data = run.raw.get("data") or {}
    if not data:
        return [
            Finding(
                "no_split_hashes",
                "warning",
                "no data split hashes recorded: leakage and selection on test cannot be checked",
                (run.label,),
            )
        ]
    val = [name for name in data if name.lower() in VAL_SPLITS]
    if not val:
        return [
            Finding(
                "no_validation_split",
                "warning",
                "no validation split recorded: model selection had only train or test to read",
                (run.label,),
                {"splits": sorted(data)},
            )
        ]
    same = [name for name in val if "test" in data and data[name] == data["test"]]
    if same:
        return [
            Finding(
                "validation_is_test",
                "bug",
                f"split {same[0]!r} has the same content "
                "hash as 'test': there is no disjoint validation split",
                (run.label,),
            )
        ]
    return []
