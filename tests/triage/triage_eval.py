"""Scores of the rule base on labelled public logs: top-1, per-label precision and recall, the
confusion matrix, the false-retry rate and the unknown rate.

A *false retry* is a log whose true label is not retryable (``LABEL_RETRYABLE``) but whose verdict
says retry: the agent would restart a bug or a resource the machine lacks, burning GPU hours. It
is counted over the logs whose true label is not retryable, whatever label the verdict gave
(a right label with a retrying rule, as NCCL's "peer vanished", counts too).
Used by ``bench/bench_triage.py`` and ``test_public_corpus.py``.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from rgt.triage import LABEL_RETRYABLE, LABELS, classify
from tests.triage.public_corpus import PUBLIC, PublicLog

ROUNDS = PUBLIC / "rounds.json"


@dataclass(frozen=True)
class Outcome:
    want: str
    got: str
    retried: bool


@dataclass(frozen=True)
class Scores:
    outcomes: tuple[Outcome, ...]

    @property
    def n(self) -> int:
        return len(self.outcomes)

    @property
    def top1(self) -> float:
        return sum(o.want == o.got for o in self.outcomes) / max(self.n, 1)

    @property
    def unknown_rate(self) -> float:
        return sum(o.got == "unknown" for o in self.outcomes) / max(self.n, 1)

    @property
    def false_retries(self) -> tuple[int, int]:
        """(non-retryable logs a verdict would retry, non-retryable logs)."""
        fixed = [o for o in self.outcomes if not LABEL_RETRYABLE.get(o.want, False)]
        return sum(o.retried for o in fixed), len(fixed)

    def per_label(self, label: str) -> tuple[int, float | None, float]:
        """(support, precision or None when never predicted, recall)."""
        support = sum(o.want == label for o in self.outcomes)
        said = sum(o.got == label for o in self.outcomes)
        hit = sum(o.want == o.got == label for o in self.outcomes)
        return support, (hit / said if said else None), hit / max(support, 1)

    def confusion(self) -> Counter[tuple[str, str]]:
        return Counter((o.want, o.got) for o in self.outcomes)


def evaluate(logs: Iterable[PublicLog]) -> Scores:
    outcomes = []
    for log in logs:
        verdict = classify(log.log, log.exit_code, log.signal)
        outcomes.append(Outcome(log.label, verdict.label, verdict.retryable))
    return Scores(tuple(outcomes))


def summary_line(scores: Scores) -> str:
    wrong, fixed = scores.false_retries
    return (
        f"{scores.n} logs, top-1 {scores.top1:.1%} ({round(scores.top1 * scores.n)} right), "
        f"unknown {scores.unknown_rate:.1%}, false-retry {wrong}/{fixed} "
        f"({wrong / max(fixed, 1):.1%})"
    )


def report(name: str, scores: Scores) -> list[str]:
    """The per-label table and the confusion matrix, as printed by the bench."""
    lines = [f"{name}: {summary_line(scores)}", _LABEL_HEADER]
    for label in [lab for lab in LABELS if lab != "unknown"]:
        support, precision, recall = scores.per_label(label)
        if support or precision is not None:
            shown = f"{precision:.2f}" if precision is not None else "-"
            lines.append(f"{label:<20}{support:>4}{shown:>11}{recall:>8.2f}")
    return [*lines, "", *confusion_matrix(scores)]


_LABEL_HEADER = f"{'label':<20}{'n':>4}{'precision':>11}{'recall':>8}"
_SHORT = {
    "cuda_oom": "coom",
    "host_oom": "hoom",
    "shm": "shm",
    "nan_loss": "nan",
    "nccl": "nccl",
    "disk_full": "disk",
    "cuda_driver": "drv",
    "device_assert": "asrt",
    "device_mismatch": "dev",
    "shape_mismatch": "shp",
    "import_error": "imp",
    "corrupt_checkpoint": "ckpt",
    "preempted": "pre",
    "ssh_drop": "ssh",
    "crlf": "crlf",
    "gpu_hw": "gpu",
    "dtype": "dtyp",
    "code_error": "code",
    "unknown": "unk",
}


def confusion_matrix(scores: Scores) -> list[str]:
    """Rows: true label; columns: predicted label (abbreviated); '.' is zero."""
    cells = scores.confusion()
    rows = [lab for lab in LABELS if any(w == lab for w, _ in cells)]
    cols = [lab for lab in LABELS if any(g == lab for _, g in cells)]
    out = ["true \\ said        " + "".join(f"{_SHORT[c]:>5}" for c in cols)]
    for want in rows:
        counts = "".join(f"{cells[(want, got)] or '.':>5}" for got in cols)
        out.append(f"{want:<19}{counts}")
    return out


def by_round(logs: Iterable[PublicLog], rounds: Path = ROUNDS) -> dict[str, list[PublicLog]]:
    """The logs of each collection round (``rounds.json``), the rest as "earlier rounds"."""
    named: dict[str, list[str]] = json.loads(rounds.read_text(encoding="utf-8"))["rounds"]
    where = {source: name for name, sources in named.items() for source in sources}
    split: dict[str, list[PublicLog]] = {}
    for log in logs:
        key = f"collected {where[log.source]}" if log.source in where else "earlier rounds"
        split.setdefault(key, []).append(log)
    return dict(sorted(split.items()))
