"""The public-log corpus: one fixture per file, a ``# key: value`` header, then the log tail.

Header keys: ``source`` (where the log was posted, or how it was reconstructed), ``label`` (the
expected root cause), optional ``exit_code``, ``signal``, ``context`` (JSON), ``secondary`` (a
label that must appear among the secondary labels) and ``note``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CORPUS = Path(__file__).parent / "corpus"


@dataclass(frozen=True)
class Fixture:
    path: Path
    label: str
    source: str
    log: str
    exit_code: int | None = None
    signal: int | None = None
    context: dict[str, Any] = field(default_factory=dict)
    secondary: str | None = None

    @property
    def group(self) -> str:
        return self.path.parent.name

    @property
    def name(self) -> str:
        return f"{self.group}/{self.path.stem}"


def parse_fixture(path: Path) -> Fixture:
    # newline="" keeps the carriage returns a CRLF script or a progress bar leaves in a log.
    with path.open(encoding="utf-8", newline="") as handle:
        text = handle.read()
    header: dict[str, str] = {}
    lines = text.split("\n")
    while lines and lines[0].startswith("# ") and ":" in lines[0]:
        key, _, value = lines.pop(0)[2:].partition(":")
        header[key.strip()] = value.strip()
    return Fixture(
        path=path,
        label=header["label"],
        source=header["source"],
        log="\n".join(lines),
        exit_code=int(header["exit_code"]) if "exit_code" in header else None,
        signal=int(header["signal"]) if "signal" in header else None,
        context=json.loads(header.get("context", "{}")),
        secondary=header.get("secondary"),
    )


def load_corpus() -> list[Fixture]:
    return [parse_fixture(path) for path in sorted(CORPUS.glob("*/*.log"))]
