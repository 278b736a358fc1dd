"""The GPUs a machine should have: ``rgt up … --expect-gpu A100:8``, or the vendor offer rgt
rented (``--gpu A100:8`` through a vendor API), kept in the machine's record; `rgt audit`
compares them with what ``nvidia-smi`` lists.

Why it matters: a rental console's "8 × A100" is a claim. Marketplaces pass fewer cards into
the container than the listing says (a host shared between tenants), list an "A100" that turns
out to be a 40 GB PCIe card or another model, or hide a card that fell off the bus; the job then
runs a different experiment (another global batch, another speed) at the full price. The
audit says so before the hour is billed, as a bug with what was expected and what was seen.

Names are compared by family, the way vendors name cards: "NVIDIA A100-SXM4-80GB", "A100 80GB
PCIe" and a driver's truncated "NVIDIA A100-SXM..." are all A100; "4090" matches "RTX 4090".
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from rgt.errors import UsageError
from rgt.findings import Finding
from rgt.state.store import Store
from rgt.watch.envgate import finding

KEY = "expect_gpu"
# Words that name the maker or the product line, not the model (vendors and nvidia-smi differ).
_NOISE = re.compile(r"\b(NVIDIA|GEFORCE|TESLA)\b", re.IGNORECASE)
_TWO_WORD = ("RTX", "GTX", "QUADRO")


@dataclass(frozen=True)
class GpuExpectation:
    family: str  # normalised model, e.g. "A100", "RTX4090"
    count: int
    source: str  # "--expect-gpu" or "runpod offer …": where the expectation came from

    @classmethod
    def parse(cls, text: str, source: str = "--expect-gpu") -> GpuExpectation:
        name, _, count = text.strip().rpartition(":")
        if not name or not count.isdigit() or int(count) < 1 or not _key(name):
            raise UsageError(
                f"bad GPU expectation {text!r}",
                fix="write TYPE:COUNT, e.g. --expect-gpu A100:8 or --expect-gpu 4090:2",
            )
        return cls(family=_key(name), count=int(count), source=source)

    def to_json(self) -> dict[str, Any]:
        return {"gpu": self.family, "count": self.count, "source": self.source}


def _key(name: str) -> str:
    return re.sub(r"[\s_\-]+", "", _NOISE.sub("", name)).upper()


def family(gpu_name: str) -> str:
    """``"NVIDIA GeForce RTX 4090"`` → ``"RTX4090"``; ``"NVIDIA A100-SXM4-80GB"`` → ``"A100"``."""
    words = [w for w in re.split(r"[\s\-_(.]+", _NOISE.sub("", gpu_name).strip()) if w]
    if not words:
        return gpu_name.upper()
    take = 2 if words[0].upper() in _TWO_WORD and len(words) > 1 else 1
    return _key("".join(words[:take]))


def matches(expected: str, seen_name: str) -> bool:
    """The card is of the expected family; "4090" also names an "RTX4090", never an "A10"
    an "A100" (only a letter prefix may be left off)."""
    seen = family(seen_name)
    return seen == expected or (seen.endswith(expected) and seen[: -len(expected)].isalpha())


def record(store: Store, name: str, expectation: GpuExpectation) -> None:
    """Keep the expectation with the machine (its connection record, beside the network choice)."""
    machine = store.machine(name)
    connection = {**machine.connection, KEY: expectation.to_json()}
    store.add_machine(replace(machine, connection=connection))


def of_machine(store: Store, name: str) -> GpuExpectation | None:
    raw = store.machine(name).connection.get(KEY)
    if not isinstance(raw, dict):
        return None
    return GpuExpectation(str(raw["gpu"]), int(raw["count"]), str(raw.get("source") or ""))


def findings(readings: dict[str, Any], expected: GpuExpectation | None) -> list[Finding]:
    """A bug when the machine has fewer GPUs than expected or GPUs of another model; a warning
    when it has more (someone may bill for them, and jobs may spread onto them)."""
    gpu = readings.get("gpu") or {}
    if expected is None or not gpu.get("available"):
        return []  # no GPU at all is already a bug of its own
    cards = gpu.get("gpus") or []
    names = [str(c.get("name") or "?") for c in cards]
    right = [n for n in names if matches(expected.family, n)]
    want = f"{expected.count} × {expected.family} (from {expected.source})"
    seen = _describe(names)
    if len(right) < expected.count:
        return [_short(want, seen, len(right), expected)]
    if len(names) > expected.count:
        return [
            _finding(
                "warning",
                f"expected {want}, the machine has {seen}",
                "check what you are billed for; set CUDA_VISIBLE_DEVICES (or --gpus) so jobs "
                "use the cards the experiment was planned for",
            )
        ]
    return []


def _short(want: str, seen: str, right: int, expected: GpuExpectation) -> Finding:
    other = "other" if right == 0 else "fewer"
    return _finding(
        "bug",
        f"expected {want}, the machine has {seen}: {other} GPUs than expected",
        f"this is not the machine you paid for ({right} of {expected.count} match): release it "
        "and rent another, or ask the vendor for a refund; if the plan changed, "
        f"`rgt up … --expect-gpu {expected.family}:{right or 1}` records the new one. Never "
        "shrink the experiment silently to fit",
    )


def _describe(names: list[str]) -> str:
    if not names:
        return "no GPU"
    counts: dict[str, int] = {}
    for name in names:
        counts[name] = counts.get(name, 0) + 1
    return ", ".join(f"{n} × {name}" for name, n in counts.items())


def _finding(severity: str, text: str, fix: str) -> Finding:
    return finding(severity, "gpu expectation", text, fix, explain="gpu_expectation")
