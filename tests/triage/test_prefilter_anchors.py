"""Anchors: one count of a short shared substring rules out every literal it covers.

The prefilter counts the literals a pattern needs before running it; with ~300 patterns that is
hundreds of passes over a 256 KiB tail. An anchor absent from the lower-cased tail proves its
literals absent, so it may only ever skip work: these tests pin that it never changes a result.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rgt.triage import _grep, classify, default_rules, engine, scan
from rgt.triage.prefilter import ANCHOR, Haystack, anchor_map, anchors_for, requirements
from tests.triage.triage_corpus import load_corpus

WORDS = ["out of memory", "Killed", "NCCL error", "loss", "nan", "Traceback", "memory limit"]


def test_each_literal_maps_to_a_substring_of_itself_shared_where_possible() -> None:
    literals = ["out of memory", "outofmemoryerror", "memory limit", "nan", "Killed process"]
    anchors = anchor_map(literals)
    assert set(anchors) == {"out of memory", "outofmemoryerror", "memory limit", "killed process"}
    assert all(len(a) == ANCHOR and a in lit for lit, a in anchors.items())
    # "emor" (or another 4-gram of "memory") covers all three memory literals with one count
    assert len({anchors[lit] for lit in ("out of memory", "outofmemoryerror", "memory limit")}) == 1


LINES = st.lists(
    st.one_of(st.sampled_from(WORDS), st.text(alphabet="abcdefKLMNOmn ory:", max_size=30)),
    max_size=30,
)


@settings(max_examples=200, deadline=None)
@given(LINES, st.sampled_from(WORDS), st.booleans())
def test_anchors_never_change_the_lines_a_pattern_is_tried_on(
    lines: list[str], word: str, fold: bool
) -> None:
    text = "\n".join(lines)
    pattern = re.compile(re.escape(word) + r"\b", re.IGNORECASE if fold else 0)
    reqs = requirements(pattern)
    anchors = anchors_for([pattern], eager=True)
    plain = Haystack(text).candidate_lines(pattern, reqs)
    assert Haystack(text, anchors).candidate_lines(pattern, reqs) == plain


def test_the_corpus_gets_the_same_verdicts_with_and_without_anchors(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fixtures = load_corpus()
    anchors_for([p for rule in default_rules() for p in rule.patterns], eager=True)
    with_anchors = [classify(fx.log, fx.exit_code, fx.signal, fx.context) for fx in fixtures]
    monkeypatch.setattr(engine, "anchors_for", lambda patterns: {})
    without = [classify(fx.log, fx.exit_code, fx.signal, fx.context) for fx in fixtures]
    assert with_anchors == without


def test_the_packaged_rules_need_fewer_anchors_than_literals() -> None:
    patterns = [p for rule in default_rules() for p in rule.patterns]
    literals = {lit.lower() for p in patterns for alts in requirements(p) for lit in alts}
    assert len(set(anchors_for(patterns, eager=True).values())) * 2 < len(literals)


def test_every_packaged_pattern_has_a_grep_form_so_the_whole_file_scan_keeps_grep() -> None:
    # One pattern without an ASCII literal GNU grep can look for sends the whole-file scan of a
    # 100 MB log back to Python (10x slower): ``scan._by_grep`` gives up on the lot.
    ranked = default_rules()
    plan = scan._plan(tuple(p for rule in ranked for p in scan._scan_patterns(rule)))
    missing = [p.pattern for p, options in plan[0] if _grep.ere(options) is None]
    assert missing == []


def test_a_rule_set_gets_its_anchors_from_its_second_log_on() -> None:
    patterns = [re.compile("out of memory"), re.compile("Killed process")]
    assert anchors_for(patterns) == {}  # one log: counting the literals is cheaper
    assert set(anchors_for(patterns)) == {"out of memory", "killed process"}
