"""Recall and precision of `rgt lint` on real training-code bugs, most of them across files.

    python tests/lint/xmeasure.py --half tune    # while writing rules: never the test half
    python tests/lint/xmeasure.py --half test    # once, to report (frozen: xcorpus/FROZEN.md)

Each case in ``tests/lint/xcorpus/cases/`` is a bug reported in a public repository (its
header names the repository, the files, the commit where they were read, and the issue or pull
request that reported or fixed it), reduced to a small project written for this corpus that
keeps the bug's structure: the same files, classes, functions and calls, never the repository's
code itself. ``#### FILE path`` blocks are the project as reported, ``#### FIXED path`` blocks
replace files to make the project after the fix (the clean variant; absent when no fix was
merged). ``expect`` lists the (file, code) pairs a reader accepts as finding the bug (``-``: a
report that was judged not a bug; only its precision counts). ``also`` lists further findings
judged true.

The cases are split by repository into a ``tune`` and a ``test`` half: the parity of the
SHA-256 of the repository's name. Recall: cases whose bug is found (any accepted pair), cross-file
cases separately. Precision: found cases over found cases plus every ``bug``/``warning`` finding
not accepted, in the reported and the fixed variants (advice is not counted).
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from rgt.lint import lint_paths

CASES = Path(__file__).parent / "xcorpus" / "cases"
# A second blind batch, written and frozen after the rules were changed because of the test
# half's misses (xcorpus/FROZEN.md): measured whole, once.
BATCH2 = Path(__file__).parent / "xcorpus" / "batch2"
BATCH3 = Path(__file__).parent / "xcorpus" / "batch3"  # a third, smaller blind batch
BATCH4 = Path(__file__).parent / "xcorpus" / "batch4"  # a fourth: 34 new repositories
BATCH5 = Path(__file__).parent / "xcorpus" / "batch5"  # written after batch4's misses were read
BATCH6 = Path(__file__).parent / "xcorpus" / "batch6"  # 27 more repositories, after batch5
BATCHES = {"batch2": BATCH2, "batch3": BATCH3, "batch4": BATCH4, "batch5": BATCH5, "batch6": BATCH6}
BATCH8 = Path(__file__).parent / "xcorpus" / "batch8"  # 20 repositories whose owners start n-z
BATCHES["batch8"] = BATCH8
BATCH7 = Path(__file__).parent / "xcorpus" / "batch7"  # 33 repositories whose owners start a-m
BATCHES["batch7"] = BATCH7
BATCH9 = Path(__file__).parent / "xcorpus" / "batch9"  # reports whose bug spans files, any owner
BATCHES["batch9"] = BATCH9
BATCH10 = Path(__file__).parent / "xcorpus" / "batch10"  # loss kept across steps, mode, order
BATCHES["batch10"] = BATCH10
BATCH11 = Path(__file__).parent / "xcorpus" / "batch11"  # 23 more repositories, any kind
BATCHES["batch11"] = BATCH11
BATCH12 = Path(__file__).parent / "xcorpus" / "batch12"  # 13 more repositories, optional
BATCHES["batch12"] = BATCH12
BATCH13 = Path(__file__).parent / "xcorpus" / "batch13"  # 22 more repositories, any kind
BATCHES["batch13"] = BATCH13
BATCH13B = Path(__file__).parent / "xcorpus" / "batch13b"  # 16 more repositories, any kind
BATCHES["batch13b"] = BATCH13B
BATCH14 = Path(__file__).parent / "xcorpus" / "batch14"  # 18 more repositories, 8 bugs across files
BATCHES["batch14"] = BATCH14
# After batches 7-10 were measured blind (each whole, once), they are split by repository like
# the first corpus: rules are changed on their tune half only ("late-tune"), and their test half
# ("late-test") is never opened while writing rules, then measured (FROZEN.md: its digest).
LATE = ("batch7", "batch8", "batch9", "batch10")
SPLITS = ("late-tune", "late-test")
Found = tuple[str, str, int]  # path (relative), code, line


@dataclass(frozen=True)
class Case:
    name: str
    repo: str
    kind: str
    cross: bool
    expect: frozenset[tuple[str, str]]
    also: frozenset[tuple[str, str]]
    files: dict[str, str]
    fixed: dict[str, str] | None

    @property
    def is_bug(self) -> bool:
        return bool(self.expect)


def half(repo: str) -> str:
    """The half a repository's cases belong to: the parity of its name's SHA-256."""
    return "test" if int(hashlib.sha256(repo.encode()).hexdigest(), 16) % 2 else "tune"


def parse(path: Path) -> Case:
    text = path.read_text()
    head, _, body = text.partition("#### ")
    meta: dict[str, str] = {}
    for line in head.strip().splitlines():
        key, _, value = line.partition(": ")
        meta[key.strip()] = value.strip()
    files: dict[str, str] = {}
    fixed: dict[str, str] = {}
    for block in ("#### " + body).split("\n#### ")[0:]:
        block = block.removeprefix("#### ")
        title, _, code = block.partition("\n")
        kind, _, name = title.partition(" ")
        (files if kind == "FILE" else fixed)[name.strip()] = code
    return Case(
        path.stem,
        meta["repo"],
        meta["kind"],
        meta["cross"] == "yes",
        _pairs(meta["expect"]),
        _pairs(meta.get("also", "-")),
        files,
        {**files, **fixed} if fixed else None,
    )


def _pairs(spec: str) -> frozenset[tuple[str, str]]:
    if spec.strip() == "-":
        return frozenset()
    out = set()
    for item in spec.split(","):
        where, _, code = item.strip().rpartition(" ")
        out.add((where.strip(), code.strip()))
    return frozenset(out)


def lint_tree(files: dict[str, str]) -> list[Found]:
    """The ``bug``/``warning`` findings of linting the project (every file) as a folder."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "project"
        for name, code in files.items():
            target = root / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(code)
        report = lint_paths([str(root)], cache=False)
        return [
            (str(Path(f.path).relative_to(root)), f.code, f.line)
            for f in report.findings
            if f.severity != "info"
        ]


@dataclass
class Tally:
    cases: Counter[str] = field(default_factory=Counter)
    found: Counter[str] = field(default_factory=Counter)
    false: list[tuple[str, str, Found]] = field(default_factory=list)
    missed: list[str] = field(default_factory=list)
    crashed: list[tuple[str, str, str]] = field(default_factory=list)
    clean_variants: int = 0


def _lint_or_crash(files: dict[str, str], name: str, variant: str, tally: Tally) -> list[Found]:
    """A project `rgt lint` raises on counts as linted with no finding (a miss), and is reported."""
    try:
        return lint_tree(files)
    except Exception as err:  # a crash is a measured result, listed, not a reason to stop
        tally.crashed.append((name, variant, f"{type(err).__name__}: {err}"))
        return []


def case_files(which: str) -> list[Path]:
    """The case files of ``which``: a half of the first corpus, a blind batch whole, or a half
    (by repository) of the late batches."""
    if which in SPLITS:
        wanted = which.split("-")[1]
        files = [p for b in LATE for p in sorted(BATCHES[b].glob("*.txt"))]
        return [p for p in files if half(parse(p).repo) == wanted]
    folder = BATCHES.get(which, CASES)
    files = sorted(folder.glob("*.txt"))
    return files if folder is not CASES else [p for p in files if half(parse(p).repo) == which]


def measure(which: str) -> Tally:
    tally = Tally()
    for path in case_files(which):
        case = parse(path)
        variants = [("reported", case.files)] + ([("fixed", case.fixed)] if case.fixed else [])
        for variant, files in variants:
            hit = False
            for found in _lint_or_crash(files, case.name, variant, tally):
                pair = (found[0], found[1])
                if variant == "reported" and pair in case.expect:
                    hit = True
                elif pair not in case.also:
                    tally.false.append((case.name, variant, found))
            if variant == "fixed" or not case.is_bug:
                tally.clean_variants += 1
            if variant == "reported" and case.is_bug:
                for key in ("all", f"cross={case.cross}", case.kind):
                    tally.cases[key] += 1
                    tally.found[key] += hit
                if not hit:
                    tally.missed.append(case.name)
    return tally


def report(which: str, tally: Tally) -> list[str]:
    found, false = tally.found["all"], len(tally.false)
    precision = found / (found + false) if found + false else 1.0
    lines = [f"{which}: {tally.cases['all']} bug cases, {tally.clean_variants} clean variants"]
    for key in ("all", "cross=True", "cross=False"):
        n, k = tally.cases[key], tally.found[key]
        lines.append(f"  recall {key:12} {k:3} / {n:3} = {k / n if n else 1.0:.2f}")
    lines.append(f"  precision    {found} / ({found} + {false} false) = {precision:.2f}")
    for kind in sorted(k for k in tally.cases if "=" not in k and k != "all"):
        lines.append(f"    {kind:10} {tally.found[kind]} / {tally.cases[kind]}")
    lines += [f"  MISSED {name}" for name in tally.missed]
    lines += [f"  FALSE  {name} ({variant}): {found}" for name, variant, found in tally.false]
    lines += [f"  CRASH  {name} ({variant}): {err}" for name, variant, err in tally.crashed]
    return lines


def frozen_digest(which: str = "test") -> str:
    """SHA-256 over the case files of ``which`` (the test half, a blind batch whole, or the late
    batches' test half), sorted by name (FROZEN.md records each)."""
    digest = hashlib.sha256()
    for path in sorted(case_files(which), key=lambda p: p.name):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def main() -> int:
    parser = argparse.ArgumentParser()
    halves = ("tune", "test", "both", *BATCHES, *SPLITS)
    parser.add_argument("--half", choices=halves, default="tune")
    parser.add_argument("--frozen", action="store_true", help="print the test half's SHA-256")
    args = parser.parse_args()
    if args.frozen:
        print(frozen_digest("test" if args.half in ("tune", "both") else args.half))
        return 0
    halves = ("tune", "test") if args.half == "both" else (args.half,)
    for which in halves:
        print("\n".join(report(which, measure(which))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
