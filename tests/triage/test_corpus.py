"""The public-log corpus: accuracy overall, every precedence case, every near-miss."""

from __future__ import annotations

from collections import Counter

import pytest

from rgt.triage import LABELS, classify
from tests.triage.triage_corpus import Fixture, load_corpus

FIXTURES = load_corpus()
PRECEDENCE = [f for f in FIXTURES if f.group == "precedence"]
NEAR_MISSES = [f for f in FIXTURES if f.group == "near_miss"]


def _verdict_ok(fixture: Fixture) -> bool:
    verdict = classify(fixture.log, fixture.exit_code, fixture.signal, fixture.context)
    if verdict.label != fixture.label:
        return False
    return fixture.secondary is None or fixture.secondary in verdict.secondary


def test_every_label_has_five_real_or_reconstructed_logs() -> None:
    counts = Counter(f.label for f in FIXTURES if f.group != "near_miss")
    thin = {label: counts[label] for label in LABELS if label != "unknown" and counts[label] < 5}
    assert not thin, f"labels with fewer than 5 fixtures: {thin}"


def test_every_fixture_cites_its_source_and_sits_in_its_label_folder() -> None:
    for fixture in FIXTURES:
        assert fixture.source, fixture.name
        assert fixture.label in LABELS, fixture.name
        if fixture.group not in ("precedence", "near_miss"):
            assert fixture.group == fixture.label, fixture.name


def test_corpus_accuracy_is_at_least_90_percent() -> None:
    misses = [f.name for f in FIXTURES if not _verdict_ok(f)]
    accuracy = 1 - len(misses) / len(FIXTURES)
    assert len(FIXTURES) >= 100
    assert accuracy >= 0.90, f"accuracy {accuracy:.1%}; misses: {misses}"


@pytest.mark.parametrize("fixture", PRECEDENCE, ids=[f.path.stem for f in PRECEDENCE])
def test_precedence_case_names_the_root_cause(fixture: Fixture) -> None:
    verdict = classify(fixture.log, fixture.exit_code, fixture.signal, fixture.context)
    assert verdict.label == fixture.label, verdict.to_dict()
    if fixture.secondary:
        assert fixture.secondary in verdict.secondary, verdict.to_dict()


@pytest.mark.parametrize("fixture", NEAR_MISSES, ids=[f.path.stem for f in NEAR_MISSES])
def test_near_miss_does_not_trigger(fixture: Fixture) -> None:
    verdict = classify(fixture.log, fixture.exit_code, fixture.signal, fixture.context)
    # A near-miss ends as unknown, or as the code_error catch-all when the log ends with the
    # program's own uncaught exception; never as the label its decoy words suggest.
    assert fixture.label in ("unknown", "code_error"), fixture.name
    assert verdict.label == fixture.label, verdict.to_dict()
    assert verdict.rule_id in ("unknown", "code.uncaught_exception")
    assert verdict.evidence, "the verdict shows its evidence"
