"""Bounds on what a machine says: every string it sends is clipped where rgt reads it.

A rented machine is not trusted to be brief. What its agent prints (``status``, ``patrol``,
``audit``) and what its events.jsonl holds reach `rgt status`/`watch --json`, the UI's pages
and, through MCP, a coding agent's context. A machine (or a job on it) that writes a 100 MB
``reason``, or an event line telling the agent to "call down NOW" a million times over, must
cost the reader a few KB, visibly cut. So the readers pass every document a machine sent
through ``document`` once, where they parse it (``backends.remote.machine_call``,
``Backend.agent_call``, the UI's events fetch; ``JobStatus.from_doc`` clips each string field
it reads again, at the cost of a length check):

- each string at most ``FIELD_BYTES`` of UTF-8, cut with ``…[clipped N bytes]``;
- each document at most its byte budget; past it, the items of a list are dropped and counted
  in ``<key>_clipped`` beside it (``events`` keep their newest, the tail), and the keys of a
  mapping likewise in ``_clipped`` (a reader that expects a list of events still gets one);
- the short fields of a mapping (ids, states, times, numbers) are read before the long ones,
  and each long one gets an equal share of what is left, so a machine cannot push ``state``
  or the events out of the budget with padding;
- nesting deeper than ``DEPTH`` becomes a marker string.

Clipping a clipped document changes nothing. Stdlib only, no rgt import: the backends, the
watch and the UI import it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

FIELD_BYTES = 2048  # one string a machine sent (a reason, an event's detail, a label)
KEY_BYTES = 128  # one key of a mapping
DOC_BYTES = 32 * 1024  # one job's status document with its events
MACHINE_BYTES = 64 * 1024  # a machine-wide document (patrol, audit) without its jobs
SHORT_BYTES = 256  # a field this short is read before the long ones
DEPTH = 16
MARK = "…[clipped {n} bytes]"
DEEP = "…[clipped: nested deeper than {depth} levels]"
SCALAR_BYTES = 8  # what a number, a boolean or null costs the budget
NEWEST_LAST = frozenset({"events"})  # lists that keep their tail when cut (events.jsonl order)


def text(value: str, limit: int = FIELD_BYTES) -> str:
    """``value`` when it fits in ``limit`` bytes of UTF-8, else its head and the marker
    (the result, marker included, fits in ``limit``)."""
    if len(value) * 4 <= limit:  # a character is at most 4 bytes: no need to encode
        return value
    raw = value.encode("utf-8", "replace")
    if len(raw) <= limit:
        return value
    keep = max(limit - len(MARK.format(n=len(raw)).encode()), 0)
    head = raw[:keep].decode("utf-8", "ignore")
    return head + MARK.format(n=len(raw) - len(head.encode("utf-8", "replace")))


def size(value: str) -> int:
    return len(value) if value.isascii() else len(value.encode("utf-8", "replace"))


def document(value: Any, budget: int = DOC_BYTES, field: int = FIELD_BYTES) -> Any:
    """``value`` (parsed JSON) with every string clipped to ``field`` bytes and the whole
    within about ``budget`` bytes; ``value`` itself when it already is (the usual case: one
    quick pass, no copy)."""
    if fits(value, budget, field):
        return value
    return _Walk(budget, field).value(value, DEPTH)


def fits(value: Any, budget: int = DOC_BYTES, field: int = FIELD_BYTES) -> bool:
    """Whether ``value`` needs no clipping: no string over ``field`` bytes, no key over
    ``KEY_BYTES``, no nesting over ``DEPTH``, and about ``budget`` bytes in all."""
    stack = [(value, DEPTH)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            if len(item) * 4 > field and size(item) > field:
                return False
            budget -= len(item) + 2
        elif isinstance(item, (Mapping, list)):
            if depth <= 0:
                return False
            if isinstance(item, Mapping):
                for key in item:
                    if not isinstance(key, str) or size(key) > KEY_BYTES:
                        return False
                    budget -= len(key) + 4
                stack.extend((v, depth - 1) for v in item.values())
            else:
                stack.extend((v, depth - 1) for v in item)
        else:
            budget -= SCALAR_BYTES
        if budget < 0:
            return False
    return True


def machine_document(doc: Mapping[str, Any]) -> dict[str, Any]:
    """An agent's machine-wide document: its own fields within ``MACHINE_BYTES``, and each of
    its ``jobs`` within ``DOC_BYTES`` of its own. Jobs are never dropped: the teardown gate
    must see every job directory the machine lists."""
    rest = document({k: v for k, v in doc.items() if k != "jobs"}, MACHINE_BYTES)
    out: dict[str, Any] = rest if isinstance(rest, dict) else {}
    if "jobs" in doc:
        jobs = doc["jobs"]
        out["jobs"] = [document(j) for j in jobs] if isinstance(jobs, list) else document(jobs)
    return out


class _Walk:
    """One pass over a document, spending its byte budget as it goes."""

    def __init__(self, budget: int, field: int) -> None:
        self.left = budget
        self.field = field

    def value(self, value: Any, depth: int, newest_last: bool = False) -> Any:
        if isinstance(value, str):
            return self.string(value, self.field)
        if isinstance(value, Mapping):
            return self.mapping(value, depth - 1) if depth > 0 else self.deep()
        if isinstance(value, list):
            return self.items(value, depth - 1, newest_last) if depth > 0 else self.deep()
        self.left -= SCALAR_BYTES
        return value

    def string(self, value: str, limit: int) -> str:
        cut = text(value, max(min(limit, self.left), len(MARK) + 8))
        self.left -= size(cut) + 2
        return cut

    def deep(self) -> str:
        return self.string(DEEP.format(depth=DEPTH), FIELD_BYTES)

    def mapping(self, value: Mapping[Any, Any], depth: int) -> dict[str, Any]:
        """Short fields first, then each long one with an equal share of what is left (so
        padding in one field cannot push the events out)."""
        out: dict[str, Any] = {}
        short = [k for k in value if _short(value[k])]
        long = [k for k in value if not _short(value[k])]
        dropped = 0
        for i, key in enumerate(short + long):
            if self.left <= 0:
                dropped += 1
                continue
            waiting = len(short) + len(long) - i  # the long ones not read yet, this one too
            share = self.left if i < len(short) else self.left // waiting
            self.put(out, str(key), value[key], depth, share)
        if dropped:
            out["_clipped"] = f"{dropped} more keys past the size limit"
        return out

    def put(self, out: dict[str, Any], key: str, item: Any, depth: int, share: int) -> None:
        name = self.string(key, KEY_BYTES)
        rest, self.left = self.left - share, share
        kept = out[name] = self.value(item, depth, newest_last=name in NEWEST_LAST)
        self.left += rest
        if isinstance(item, list) and isinstance(kept, list) and len(kept) < len(item):
            out[f"{name}_clipped"] = len(item) - len(kept)

    def items(self, value: list[Any], depth: int, newest_last: bool) -> list[Any]:
        """The first items that fit; of a list that is newest last, the last ones."""
        out = []
        for item in reversed(value) if newest_last else value:
            if self.left <= 0:
                break
            out.append(self.value(item, depth))
        return out[::-1] if newest_last else out


def _short(value: Any) -> bool:
    if isinstance(value, str):
        return len(value) <= SHORT_BYTES // 4 or size(value) <= SHORT_BYTES
    return not isinstance(value, (Mapping, list))
