"""The known logs rgt ships (``rgt/triage/known/logs.json``) to vet learned rules against.

They are the tails of the triage corpus (``tests/triage/corpus``), which is not installed with rgt:
every labelled fixture's last ``TAIL_LINES`` lines, each cut at ``LINE_CHARS``. Regenerate after
the corpus changes: ``python -m tests.triage.learn_known`` (a test checks the two agree).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import rgt.triage
from tests.triage.triage_corpus import load_corpus

TAIL_LINES = 40
LINE_CHARS = 400
SHIPPED = Path(rgt.triage.__file__).parent / "known" / "logs.json"


def build() -> str:
    logs: list[dict[str, Any]] = []
    for fixture in load_corpus():
        lines = fixture.log.split("\n")[-TAIL_LINES:]
        entry: dict[str, Any] = {
            "name": fixture.name,
            "label": fixture.label,
            "tail": "\n".join(line[:LINE_CHARS] for line in lines),
        }
        for key in ("exit_code", "signal"):
            if getattr(fixture, key) is not None:
                entry[key] = getattr(fixture, key)
        if fixture.context:
            entry["context"] = fixture.context
        logs.append(entry)
    doc = {"source": "tests/triage/corpus, by tests/triage/learn_known.py", "logs": logs}
    return json.dumps(doc, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    SHIPPED.write_text(build(), encoding="utf-8")
