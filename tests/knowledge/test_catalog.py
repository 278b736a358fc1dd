"""The pitfall catalog: every triage label and lint code has an entry, every entry parses and
names its sources, and the package ships the Markdown where grep finds it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from rgt import knowledge
from rgt.knowledge.catalog import EntryError, parse
from rgt.lint import RULES
from rgt.triage.labels import LABELS


def test_the_catalog_holds_at_least_sixty_entries_of_known_kinds() -> None:
    entries = knowledge.entries()
    files = list(knowledge.entries_dir().glob("*.md"))
    assert len(entries) == len(files) >= 60
    assert {e.kind for e in entries} == set(knowledge.KINDS)
    assert len({e.id for e in entries}) == len(entries)  # ids are unique


@pytest.mark.parametrize("label", LABELS)
def test_every_triage_label_has_a_full_entry(label: str) -> None:
    _assert_full(knowledge.lookup(label), label, "label")


def test_every_label_a_bundled_triage_rule_names_is_in_the_catalog() -> None:
    from rgt.triage.rules import load_rules

    labels = {rule.label for rule in load_rules()}
    assert labels and labels <= set(LABELS)
    assert all(knowledge.lookup(label).kind == "label" for label in labels)


@pytest.mark.parametrize("code", sorted(RULES))
def test_every_lint_code_has_a_full_entry(code: str) -> None:
    _assert_full(knowledge.lookup(code), code, "lint")


def _assert_full(entry: knowledge.Entry, key: str, kind: str) -> None:
    assert (entry.id, entry.kind) == (key, kind)
    positions = [entry.body.find(section + "\n") for section in knowledge.SECTIONS]
    assert -1 not in positions, f"{key}: missing {knowledge.SECTIONS[positions.index(-1)]}"
    assert positions == sorted(positions), f"{key}: sections out of order"
    for start, end in zip(positions, [*positions[1:], len(entry.body)], strict=True):
        text = entry.body[start:end].split("\n", 1)[1].strip()
        assert len(text) > 20, f"{key}: a section is empty"


def test_every_entry_names_a_public_source_and_every_alias_is_unambiguous() -> None:
    owner: dict[str, str] = {}
    for entry in knowledge.entries():
        assert entry.title and entry.body.strip(), entry.id
        assert any(s.startswith("https://") or s.startswith("http://") for s in entry.sources), (
            f"{entry.id} names no public source"
        )
        for key in (entry.id, *entry.aliases):
            assert owner.setdefault(key.lower(), entry.id) == entry.id, f"{key} names two entries"


def test_the_topics_the_practice_needs_are_there() -> None:
    for key in (
        "oom-ladder", "numerical-stability", "loss-spikes", "distributed-launch",
        "rank-divergence", "throughput", "communication-bound", "torch-compile",
        "flash-attention", "profiler", "data-pipeline", "llm-pitfalls",
        "detection-segmentation", "diffusion", "rl-pitfalls", "vlm-pitfalls",
        "verify-method", "checkpoints", "exact-resume", "danger-clocks",
    ):  # fmt: skip
        assert knowledge.lookup(key).kind == "topic"
    ladder = knowledge.lookup("oom-ladder").body.split("## The ladder")[1].split("\n## ")[0]
    rungs = ["accumulation", "bf16", "checkpointing", "expandable_segments", "FSDP", "offload"]
    rungs.append("LoRA")
    assert [ladder.find(r) for r in rungs] == sorted(ladder.find(r) for r in rungs)
    launch = knowledge.lookup("distributed-launch").body
    for name in ("LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "RGT_NNODES", "RGT_NODE_RANK"):
        assert name in launch


def test_lookup_is_case_blind_and_takes_aliases() -> None:
    assert knowledge.lookup("rgt101").id == "RGT101"
    assert knowledge.lookup("OOM").id == "cuda_oom"
    assert knowledge.lookup("expandable-segments").id == "oom-ladder"


def test_a_broken_front_matter_names_the_file_and_line() -> None:
    with pytest.raises(EntryError, match=r"x\.md: no front matter"):
        parse("# no block\n", "x.md")
    with pytest.raises(EntryError, match=r"x\.md:3: cannot read"):
        parse("---\nid: a\n  stray\n---\nbody\n", "x.md")
    with pytest.raises(EntryError, match="kind 'recipe'"):
        parse("---\nid: a\nkind: recipe\ntitle: t\n---\nbody\n", "x.md")
    entry = parse("---\nid: a\nkind: topic\ntitle: T: x\nsources:\n  - https://a\n---\nB\n")
    assert (entry.title, entry.sources, entry.body) == ("T: x", ("https://a",), "B\n")


def test_the_entries_are_plain_markdown_that_grep_finds() -> None:
    package = Path(knowledge.__file__).parent
    found = subprocess.run(
        ["grep", "-ril", "expandable_segments", str(package)], capture_output=True, text=True
    )
    assert "oom-ladder.md" in found.stdout and "cuda_oom.md" in found.stdout
