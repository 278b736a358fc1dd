"""Ways a state file gets cut or garbled (a full disk, a crashed filesystem, a bad copy).

Every kind makes the file invalid for sure (a garbled byte is 0xFF, never valid UTF-8, so a
trial cannot accidentally produce a valid file with other values). ``None`` means: remove it.
"""

from __future__ import annotations

import random
from pathlib import Path

# Whole-file corruptions of a JSON document (status.json, manifest.json).
JSON_KINDS = (
    "empty",
    "cut",
    "cut",
    "cut",
    "cut",
    "cut",
    "garble",
    "garble",
    "garble",
    "list",
    "string",
    "null",
    "number",
    "binary",
    "removed",
)

# One bad line appended to (or cut into) events.jsonl.
EVENT_KINDS = (
    "list",
    "string",
    "number",
    "null",
    "empty-object",
    "wrong-types",
    "cut-last-line",
    "binary",
    "nul-bytes",
    "removed",
)

# The local SQLite database.
DB_KINDS = (
    "empty",
    "cut",
    "cut",
    "cut",
    "cut",
    "zero-header",
    "garble-header",
    "junk",
    "text",
    "removed",
)


def corrupt_json(data: bytes, kind: str, r: random.Random) -> bytes | None:
    body = data.rstrip()
    if kind == "empty":
        return b""
    if kind == "cut":
        return body[: r.randrange(1, len(body) - 1)]
    if kind == "garble":
        out = bytearray(body)
        for _ in range(r.randint(1, 8)):
            out[r.randrange(len(out))] = 0xFF
        return bytes(out)
    if kind == "binary":
        return bytes(r.randrange(256) for _ in range(r.randint(1, 2048)))
    fixed = {"list": b"[1, 2, 3]\n", "string": b'"succeeded"\n', "null": b"null\n"}
    if kind in fixed:
        return fixed[kind]
    if kind == "number":
        return b"%d\n" % r.randint(-5, 10**6)
    assert kind == "removed", kind
    return None


def corrupt_events(data: bytes, kind: str, r: random.Random) -> bytes | None:
    lines = {
        "list": b'["attempt_started", 1]',
        "string": b'"succeeded"',
        "number": b"42",
        "null": b"null",
        "empty-object": b"{}",
        "wrong-types": b'{"kind": 5, "time": null, "detail": "x", "attempt": "two", "next": []}',
        "binary": bytes(r.randrange(128, 256) for _ in range(r.randint(1, 200))),
        "nul-bytes": b"\0" * r.randint(1, 4096),
    }
    if kind in lines:
        at = r.choice(("end", "middle"))
        rows = data.splitlines(keepends=True)
        index = len(rows) if at == "end" else r.randrange(len(rows) + 1)
        return b"".join([*rows[:index], lines[kind] + b"\n", *rows[index:]])
    if kind == "cut-last-line":
        last = data.rstrip().rfind(b"\n") + 1
        return data[: r.randrange(last + 1, len(data.rstrip()))]
    assert kind == "removed", kind
    return None


def corrupt_db(data: bytes, kind: str, r: random.Random) -> bytes | None:
    if kind == "empty":
        return b""
    if kind == "cut":
        return data[: r.randrange(1, len(data))]
    if kind == "zero-header":
        return b"\0" * 100 + data[100:]
    if kind == "garble-header":
        out = bytearray(data)
        for _ in range(r.randint(1, 6)):
            out[r.randrange(16, 100)] ^= 0xFF
        return bytes(out)
    if kind == "junk":
        return bytes(r.randrange(256) for _ in range(len(data)))
    if kind == "text":
        return b"this is not a database\n"
    assert kind == "removed", kind
    return None


def apply(path: Path, new: bytes | None) -> None:
    if new is None:
        path.unlink()
    else:
        path.write_bytes(new)
