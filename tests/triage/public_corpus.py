"""The generalization corpus: real failure logs from public issue trackers, split by repository.

``tests/triage/public/<label>.txt`` holds the logs of one expected label. Each log starts with a
header line ``=== <source URL> [exit_code=N] [signal=N]`` and runs to the next header; the text
is the relevant tail of what was posted (machine-printed lines only, never hand-written). The
split is by source repository (``owner/name`` of a GitHub URL, the host of any other page), so
two logs from one project never land on both sides: ``tune`` is where rules are written and tuned,
``test`` is only measured. The split is the first byte of sha256(repository): even -> tune, odd ->
test. The test half is frozen: ``FROZEN_TEST_SHA256`` is the digest of every test log (label,
source, status and text), recorded before the rules were extended for it (BENCHMARKS.md names the
commit), so editing, adding or dropping a test log fails ``test_public_corpus``. A log whose source
the rule base was first written from (cited in ``tests/triage/corpus/``) is not measured at all: it
would score memory, not generalization.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

PUBLIC = Path(__file__).parent / "public"
WRITTEN_FROM = Path(__file__).parent / "corpus"
_HEADER = re.compile(r"^=== (\S+)((?: \w+=-?\d+)*)\s*$", re.M)
_GITHUB = re.compile(r"https?://github\.com/([^/]+/[^/#?]+)")
TUNE, TEST = "tune", "test"
FROZEN_TEST_SHA256 = "723c40e640dccc011e202fc39df3cf0940715e54ffcfe91c5695125bd473b454"


@dataclass(frozen=True)
class PublicLog:
    label: str
    source: str
    log: str
    exit_code: int | None = None
    signal: int | None = None

    @property
    def repository(self) -> str:
        found = _GITHUB.match(self.source)
        if found:
            return found.group(1).lower()
        return self.source.split("://", 1)[-1].split("/", 1)[0].lower()

    @property
    def half(self) -> str:
        digest = hashlib.sha256(self.repository.encode()).digest()
        return TUNE if digest[0] % 2 == 0 else TEST


def parse_label_file(path: Path) -> list[PublicLog]:
    text = path.read_text(encoding="utf-8")
    heads = list(_HEADER.finditer(text))
    logs = []
    for i, head in enumerate(heads):
        end = heads[i + 1].start() if i + 1 < len(heads) else len(text)
        fields = dict(item.split("=") for item in head.group(2).split())
        logs.append(
            PublicLog(
                label=path.stem,
                source=head.group(1),
                log=text[head.end() + 1 : end].strip("\n") + "\n",
                exit_code=int(fields["exit_code"]) if "exit_code" in fields else None,
                signal=int(fields["signal"]) if "signal" in fields else None,
            )
        )
    return logs


def written_from() -> set[str]:
    """Sources cited by the corpus the rules were first written from."""
    cited = re.compile(r"^# source: (https?://\S+)", re.M)
    return {
        m.group(1).split("#")[0]
        for path in WRITTEN_FROM.glob("*/*.log")
        for m in cited.finditer(path.read_text(encoding="utf-8", errors="replace"))
    }


def load_public(half: str | None = None, measured: bool = True) -> list[PublicLog]:
    """The logs of one half (or both); ``measured`` leaves out those the rules were written from."""
    logs = [log for path in sorted(PUBLIC.glob("*.txt")) for log in parse_label_file(path)]
    seen = written_from() if measured else set()
    return [log for log in logs if (half is None or log.half == half) and log.source not in seen]


def half_digest(half: str) -> str:
    """sha256 over every log of one half (measured or not), in source order: what was frozen."""
    digest = hashlib.sha256()
    for log in sorted(load_public(half, measured=False), key=lambda log: log.source):
        record = f"{log.label}\n{log.source}\n{log.exit_code}\n{log.signal}\n{log.log}\0"
        digest.update(record.encode("utf-8"))
    return digest.hexdigest()
