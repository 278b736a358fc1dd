"""The grep prefilter of reconcile never drops a line the pure-Python scan would judge: both
paths run over the same tricky repository (real GNU grep, real files) and must agree."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest

from rgt.deliver import _grep
from rgt.deliver._grep import gnu_grep, grep_batches, grep_pattern
from rgt.deliver.reconcile import WINDOW, Target, anchor_pattern, scan
from rgt.deliver.sources import MAX_BYTES, candidate_files, walk
from tests.conftest import HOSTILE_NAMES

TARGETS = [
    Target("acc", 0.8734, ("accuracy", "test accuracy"), percent=True),
    Target("loss", 0.412, ("loss",)),
    Target("kl", 0.031, ("kl divergence",)),
    Target("iou", 0.5, ("iou@0.5",)),  # the anchor holds the measurement mark itself
]
WORDS = {a for t in TARGETS for a in t.anchors}
LATIN1 = os.fsdecode(b"caf\xe9 latin-1.md")  # a file name that is not UTF-8

TRICKY: dict[str, bytes] = {
    "README.md": b"Test accuracy 87.34 % and loss 0.412.\n",
    "crlf.md": b"Old accuracy: 87.1 %\r\nloss 0.415\r\n",
    "bad bytes.txt": b"loss \xff\xfe\x80 0.415 \xe2\x84\n",
    "nul.tex": b"loss\x000.409\n",
    "arabic digits.md": "loss ٠.٤١٥\n".encode(),  # Python's \d: a drift grep's [0-9] misses
    "kelvin.md": "\u212aL divergence is 0.0312\n".encode(),  # lowers to "kl divergence"
    "UPPER.md": b"TEST ACCURACY 87.1%\n",
    "long line.md": ("accuracy " + "word " * 2000 + "87.2 % and accuracy 87.0 %\n").encode(),
    "-leading dash.md": b"accuracy 86.9 %\n",
    "--help.md": b"loss .415\n",
    "colon:7:9.md": b"loss 0.415\n",  # grep prints "path NUL 1:0:line"
    "new\nline.md": b"accuracy 87.1 %\n",
    "thresholds.md": b"we count a box at the IoU@0.5 threshold\n",
    "eval.py": b'x = "loss 0.415"  # accuracy 87.1 %\n',
    "kernel.cu": b"int x; /* loss 0.415 */\n",
    "unicode ünï.rst": "Die Genauigkeit (accuracy) beträgt 87,3 — früher 87.1 %\n".encode(),
    "plain.md": b"accuracy is what we report\n",  # an anchor, no measurement
    "numbers.md": b"87.1 % of 0.415\n",  # measurements, no anchor
    "node_modules/x.md": b"accuracy 80.0 %\n",  # never walked
}


def _notebook() -> bytes:
    cells = [{"cell_type": "markdown", "source": ['Accuracy \u00e9t\u00e9 "quoted" 87.1 %\n']}]
    return json.dumps({"cells": cells, "nbformat": 4}, ensure_ascii=True).encode()


def make_repo(root: Path, *, dangling: bool) -> Path:
    root.mkdir(exist_ok=True)
    for name, body in TRICKY.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(body)
    for name in HOSTILE_NAMES:
        (root / name).mkdir()
        (root / name / f"{name}.md").write_text("accuracy 87.1 %\n")
    (root / "notes.ipynb").write_bytes(_notebook())
    (root / LATIN1).write_bytes(b"accuracy 87.1 %\n")
    big = b"loss 0.415\n" + b"filler text\n" * (MAX_BYTES // 12) + b"loss 0.414" + b" " * 99 + b"\n"
    (root / "big.txt").write_bytes(big)  # only the first MAX_BYTES are read
    filler = b"x" * 99 + b"\n"
    head = filler * ((MAX_BYTES - 12) // 100) + b"x" * ((MAX_BYTES - 12) % 100 - 1) + b"\n"
    # the last line read is cut inside the "é": Python never sees the accuracy after it
    (root / "straddle.txt").write_bytes(head + "loss 0.415 é accuracy 87.1 %\n".encode())
    (root / "link.md").symlink_to(root / "crlf.md")
    (root / "folder.md").symlink_to(root / "node_modules")  # grep skips it, Python cannot open it
    if dangling:  # grep fails on its batch, which Python then reads whole
        (root / "dead.md").symlink_to(root / "nowhere.md")
    return root


@pytest.mark.parametrize("dangling", [False, True])
def test_prefilter_and_python_give_the_same_report(tmp_path: Path, dangling: bool) -> None:
    repo = make_repo(tmp_path / "repo", dangling=dangling)
    fast = scan(repo, TARGETS).to_json()
    slow = scan(repo, TARGETS, prefilter=False).to_json()
    assert fast == slow
    drifts = {(d["file"], d["line"]) for d in fast["drifts"]}
    first_lines = [
        "crlf.md", "link.md", "bad bytes.txt", "nul.tex", "arabic digits.md", "kelvin.md",
        "UPPER.md", "long line.md", "-leading dash.md", "--help.md", "new\nline.md", "eval.py",
        "colon:7:9.md", "kernel.cu", "unicode ünï.rst", "notes.ipynb", "big.txt", LATIN1,
        *(f"{name}/{name}.md" for name in HOSTILE_NAMES),
    ]  # fmt: skip
    expected = {(name, 1) for name in first_lines} | {("crlf.md", 2), ("link.md", 2)}
    expected.add(("straddle.txt", (MAX_BYTES - 12) // 100 + 2))
    assert drifts == expected
    assert ("iou", "thresholds.md", 1) in {(o["claim"], o["file"], o["line"]) for o in fast["ok"]}
    # kl has only a drifted copy: a drift, not missing
    assert fast["missing"] == [] and not (tmp_path / "PWNED").exists()


def test_grep_keeps_every_candidate_and_drops_the_rest(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, dangling=False)
    batches = list(grep_batches(list(walk(repo, set())), WORDS))
    assert all(kept is not None for _, kept in batches)
    kept = set().union(*(k for _, k in batches if k is not None))
    names = {os.path.relpath(path, repo) for path in kept}
    assert "plain.md" not in names and "numbers.md" not in names
    assert "notes.ipynb" not in names  # notebooks go to Python unfiltered
    candidates = {os.path.relpath(p, repo) for p, _ in _candidates(repo, prefilter=False)}
    assert candidates - {"notes.ipynb"} <= names
    assert {"kelvin.md", "arabic digits.md", "thresholds.md", "new\nline.md"} <= names


def _candidates(repo: Path, *, prefilter: bool) -> list[tuple[str, list[tuple[int, str]]]]:
    files = list(walk(repo, set()))
    pattern = anchor_pattern(TARGETS)
    return list(candidate_files(files, pattern, WORDS, WINDOW, prefilter=prefilter))


TOKENS = [
    b"accuracy", b"ACCURACY", b"Accur", b"acy", b"loss", b"Loss", b"lo", b"ss", b"kl divergence",
    "\u212al divergence".encode(), b"iou@0.5", b"87.1", b"87.34", b"0.415", b"%", b"\\%", b".",
    b"5", ".\u0663".encode(), "\u0664".encode(), b" ", b" ", b" ", b"word ", b"\t", b"\r", b"\n",
    b"\x00", "é".encode(), "İ".encode(), b"\xff", b"\xe2\x84", b"#", b"//", b"/*", b"*", b"-",
]  # fmt: skip


def test_random_corpus_same_candidates_over_several_batches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """1,200 files of random tokens in batches of 300: every file and line the pure-Python
    scan returns, the prefiltered scan returns too, in the same order."""
    monkeypatch.setattr(_grep, "GREP_BATCH", 300)
    monkeypatch.setattr(_grep, "GREP_CROWDED", 1.0)  # grep on every batch, however full
    rng = random.Random(7)
    suffixes = [".md", ".txt", ".tex", ".py", ".c", ".rst"]
    for index in range(1200):
        tokens = [rng.choice(TOKENS) for _ in range(rng.randint(1, 60))]
        name = f"d{index % 7}/f{index}{rng.choice(suffixes)}"
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_bytes(b"".join(tokens))
    slow = _candidates(tmp_path, prefilter=False)
    assert _candidates(tmp_path, prefilter=True) == slow
    assert 50 < len(slow) < 1100  # the corpus holds both kinds of file
    kept = [k for _, k in grep_batches(list(walk(tmp_path, set())), WORDS)]
    assert len(kept) >= 3 and all(k is not None for k in kept)
    assert len(set().union(*kept)) < 1200  # grep did drop files


def test_a_crowded_batch_turns_grep_off_and_a_failed_one_is_read_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_grep, "GREP_BATCH", 10)
    for index in range(40):  # a metric name and a measurement in every file
        (tmp_path / f"f{index:02d}.md").write_text(f"loss 0.4{index:02d}\n")
    files = sorted(walk(tmp_path, set()))
    kept = [k for _, k in grep_batches(files, WORDS)]
    assert [k is None for k in kept] == [False, False, True, True]  # two were already running
    (tmp_path / "f05.md").unlink()  # gone since the walk: grep fails on the first batch
    kept = [k for _, k in grep_batches(files[:20], WORDS)]
    assert kept[0] is None and kept[1] is not None and len(kept[1]) == 10


def test_no_gnu_grep_or_non_ascii_anchor_reads_every_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_repo(tmp_path / "repo", dangling=False)
    (repo / "fr.md").write_text("La précision atteint 87.1 %.\n")
    with_grep = scan(repo, TARGETS).to_json()
    assert grep_pattern({"précision"}) is None and grep_pattern(set()) is None
    french = [*TARGETS, Target("prec", 0.8734, ("précision",), percent=True)]
    report = scan(repo, french)
    assert ("prec", "fr.md", 1) in {(h.claim, h.file, h.line) for h in report.drifts}
    empty = tmp_path / "empty bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    assert gnu_grep() is None
    assert list(grep_batches([("x.md", ".md")], WORDS)) == [([("x.md", ".md")], None)]
    without = scan(repo, TARGETS).to_json()
    assert without == with_grep


def test_a_root_starting_with_a_dash(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Relative walked paths then start with "-": grep must not read them as options."""
    make_repo(tmp_path / "-repo", dangling=False)
    monkeypatch.chdir(tmp_path)
    fast = scan(Path("-repo"), TARGETS)
    assert fast.to_json() == scan(Path("-repo"), TARGETS, prefilter=False).to_json()
    assert ("-leading dash.md", 1) in {(h.file, h.line) for h in fast.drifts}


def test_stopping_early_leaves_no_grep_running(tmp_path: Path) -> None:
    for index in range(1500):
        (tmp_path / f"f{index}.md").write_text("loss 0.415\n")
    batches = grep_batches(list(walk(tmp_path, set())), WORDS)
    next(batches)
    batches.close()
    assert _child_greps() == []


def _child_greps() -> list[int]:
    children = []
    for entry in os.listdir("/proc"):
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        name, rest = stat[stat.index("(") + 1 : stat.rindex(")")], stat[stat.rindex(")") + 2 :]
        if name == "grep" and int(rest.split()[1]) == os.getpid():
            children.append(int(entry))
    return children
