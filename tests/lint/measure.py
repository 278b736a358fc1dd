"""Precision and recall of `rgt lint` on the corpus of real public training scripts.

    python tests/lint/measure.py            # both halves, per severity tier and per rule

``tests/lint/corpus/{dev,heldout}/`` hold the scripts (SOURCES.md: repository, path, commit,
licence), split by repository: rules were tuned on ``dev`` and are measured on ``heldout``.
``labels.json`` lists, per file, the findings a reader judged true (``true``, including ones
the linter misses), and the emitted findings judged false with the reason (``not``). A finding
is matched by (code, line); notebook lines are "cell:line".
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from rgt.lint import RULES, lint_paths

CORPUS = Path(__file__).parent / "corpus"
Key = tuple[str, str, str]  # file, code, line


@dataclass
class Tally:
    tp: Counter[str] = field(default_factory=Counter)
    fp: Counter[str] = field(default_factory=Counter)
    fn: Counter[str] = field(default_factory=Counter)
    unjudged: list[Key] = field(default_factory=list)
    files: int = 0
    skipped: int = 0

    def score(self, codes: set[str]) -> tuple[int, int, int, float, float]:
        tp = sum(self.tp[c] for c in codes)
        fp = sum(self.fp[c] for c in codes)
        fn = sum(self.fn[c] for c in codes)
        precision = tp / (tp + fp) if tp + fp else 1.0
        recall = tp / (tp + fn) if tp + fn else 1.0
        return tp, fp, fn, precision, recall


def measure(half: str) -> Tally:
    labels = json.loads((CORPUS / "labels.json").read_text())[half]
    tally = Tally()
    for path in sorted((CORPUS / half).glob("*.txt")):
        report = lint_paths([str(path)])
        tally.files += 1
        tally.skipped += len(report.skipped)
        entry = labels.get(path.name, {})
        true = {(c, str(line)) for c, line in entry.get("true", [])}
        judged_false = {(c, str(line)) for c, line, _why in entry.get("not", [])}
        found = {(f.code, f"{f.cell}:{f.line}" if f.cell else str(f.line)) for f in report.findings}
        for code, line in found:
            if (code, line) in true:
                tally.tp[code] += 1
            else:
                tally.fp[code] += 1
                if (code, line) not in judged_false:
                    tally.unjudged.append((path.name, code, line))
        for code, _line in true - found:
            tally.fn[code] += 1
    return tally


def report(half: str, tally: Tally) -> list[str]:
    tiers = {
        "bug+warning": {c for c, r in RULES.items() if r.severity.value != "info"},
        "advice": {c for c, r in RULES.items() if r.severity.value == "info"},
        "all": set(RULES),
    }
    lines = [f"{half}: {tally.files} files ({tally.skipped} skipped as unparsable)"]
    for name, codes in tiers.items():
        tp, fp, fn, p, r = tally.score(codes)
        lines.append(
            f"  {name:12} TP {tp:3}  FP {fp:3}  FN {fn:3}  precision {p:.2f}  recall {r:.2f}"
        )
    for code in sorted(set(tally.tp) | set(tally.fp) | set(tally.fn)):
        tp, fp, fn, p, r = tally.score({code})
        lines.append(f"    {code} TP {tp:3}  FP {fp:3}  FN {fn:3}")
    lines += [f"  UNJUDGED (label it): {u}" for u in tally.unjudged]
    return lines


def main() -> int:
    unjudged = 0
    for half in ("dev", "heldout"):
        tally = measure(half)
        unjudged += len(tally.unjudged)
        print("\n".join(report(half, tally)))
    return 1 if unjudged else 0


if __name__ == "__main__":
    sys.exit(main())
