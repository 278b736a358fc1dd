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

``tests/triage/public_late/<label>.txt`` is a late batch in the same format, collected from
repositories no earlier log comes from (of either half, or of the corpus the rules were written
from) and frozen whole before it was scored: ``FROZEN_LATE_SHA256`` is its digest, recorded in the
commit that added it, so the batch measures the rules blind (``bench_triage.py --half late``).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

PUBLIC = Path(__file__).parent / "public"
LATE = Path(__file__).parent / "public_late"
WRITTEN_FROM = Path(__file__).parent / "corpus"
_HEADER = re.compile(r"^=== (\S+)((?: \w+=-?\d+)*)\s*$", re.M)
_GITHUB = re.compile(r"https?://github\.com/([^/]+/[^/#?]+)")
TUNE, TEST = "tune", "test"
FROZEN_TEST_SHA256 = "723c40e640dccc011e202fc39df3cf0940715e54ffcfe91c5695125bd473b454"
FROZEN_LATE_SHA256 = "3bf70813c013b4853264d25e6d6e3319e69d942b6cf07ff350cc62808e2adf37"


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


def load_late(folder: Path = LATE) -> list[PublicLog]:
    """The late batch: every log, both halves (its repositories are new to the whole corpus)."""
    return [log for path in sorted(folder.glob("*.txt")) for log in parse_label_file(path)]


def digest_of(logs: list[PublicLog]) -> str:
    """sha256 over logs (label, source, status and text), in source order: what is frozen."""
    digest = hashlib.sha256()
    for log in sorted(logs, key=lambda log: log.source):
        record = f"{log.label}\n{log.source}\n{log.exit_code}\n{log.signal}\n{log.log}\0"
        digest.update(record.encode("utf-8"))
    return digest.hexdigest()


def half_digest(half: str) -> str:
    """The digest of every log of one half (measured or not)."""
    return digest_of(load_public(half, measured=False))


def late_digest(folder: Path = LATE) -> str:
    """The digest of the whole late batch."""
    return digest_of(load_late(folder))
