"""Every tool result fits in a budget (64 KB by default), cut visibly, with the command that
shows the rest.

A tool's result lands in a coding agent's context whole: a machine that inflates what it says
(a status reason, an event line of many MB) must not flood that context, nor smuggle in
"IGNORE PREVIOUS INSTRUCTIONS" by the megabyte. The readers already clip each string a machine
sent (``rgt.clip``); this is the last bound, on the whole answer as the wire carries it (the
JSON text and the same document as ``structuredContent``). A result over the budget is shrunk
structurally, so it stays valid JSON the model can read: strings cut shorter, lists to their
first and last items, mappings to their first keys, each cut marked ``…[clipped …]``, in
steps until it fits; the document then carries ``result_truncated`` (sizes and the command
that prints the whole document in a terminal) and the text opens with the same words.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from rgt import clip

DEFAULT_MAX_BYTES = 64 * 1024
MIN_MAX_BYTES = 4096  # below this not even the marker and the command fit
ENVELOPE_BYTES = 96  # {"jsonrpc":"2.0","id":…,"result":…} around the result
# (bytes per string, items per list or mapping), loosest first.
STEPS = ((4096, 256), (1024, 64), (256, 16), (96, 6), (48, 2))
ITEMS_MARK = "…[clipped {n} items]"
KEYS_MARK = "…[clipped {n} keys]"


def success(document: dict[str, Any], max_bytes: int, see_more: str) -> dict[str, Any]:
    """The ``tools/call`` result of a document: its compact JSON text beside the same
    document as structured content, within ``max_bytes`` on the wire."""
    result = _success(document)
    whole = wire_size(result)
    if whole + ENVELOPE_BYTES <= max_bytes:
        return result
    for field, items in STEPS:
        cut = shrink(document, field, items)
        cut["result_truncated"] = _marker(whole, max_bytes, see_more)
        result = _success(cut, _notice(whole, max_bytes, see_more))
        if wire_size(result) + ENVELOPE_BYTES <= max_bytes:
            return result
    return _success(
        _stub(document, whole, max_bytes, see_more), _notice(whole, max_bytes, see_more)
    )


def failure(text: str, max_bytes: int, see_more: str) -> dict[str, Any]:
    """An error result (``isError``): its text within ``max_bytes``, cut with the command."""
    result = {"content": [{"type": "text", "text": text}], "isError": True}
    whole = wire_size(result)
    if whole + ENVELOPE_BYTES <= max_bytes:
        return result
    room = max_bytes - ENVELOPE_BYTES - 256 - len(see_more.encode())
    notice = _notice(whole, max_bytes, see_more)
    while True:  # JSON escapes can grow the text: cut until the wire form fits
        cut = clip.text(text, max(room, 64))
        result = {"content": [{"type": "text", "text": f"{notice}\n{cut}"}], "isError": True}
        if wire_size(result) + ENVELOPE_BYTES <= max_bytes or room <= 64:
            return result
        room //= 2


def wire_size(result: Mapping[str, Any]) -> int:
    """Bytes of ``result`` as the wire writes it (``wire.Wire.send``)."""
    data = json.dumps(result, separators=(",", ":"), ensure_ascii=False, default=str)
    return len(data.encode("utf-8", "replace"))


def compact(document: Any) -> str:
    """The text form of a document: compact (indenting costs a third more tokens)."""
    return json.dumps(
        document, separators=(",", ":"), sort_keys=True, ensure_ascii=False, default=str
    )


def shrink(value: Any, field: int, items: int, depth: int = clip.DEPTH) -> Any:
    """``value`` with strings of at most ``field`` bytes, lists and mappings of at most
    ``items`` entries (a list keeps its head and its tail), each cut marked."""
    if isinstance(value, str):
        return clip.text(value, field)
    if isinstance(value, (Mapping, list)) and depth <= 0:
        return clip.DEEP.format(depth=clip.DEPTH)
    if isinstance(value, Mapping):
        keys = list(value)[:items]
        out = {clip.text(str(k), field): shrink(value[k], field, items, depth - 1) for k in keys}
        if len(value) > items:
            out["…"] = KEYS_MARK.format(n=len(value) - items)
        return out
    if isinstance(value, list):
        if len(value) <= items:
            return [shrink(v, field, items, depth - 1) for v in value]
        head, tail = value[: items // 2], value[len(value) - (items - items // 2) :]
        mark = ITEMS_MARK.format(n=len(value) - items)
        return [*(shrink(v, field, items, depth - 1) for v in head), mark] + [
            shrink(v, field, items, depth - 1) for v in tail
        ]
    return value


def _success(document: dict[str, Any], notice: str | None = None) -> dict[str, Any]:
    content = [{"type": "text", "text": compact(document)}]
    if notice:
        content.insert(0, {"type": "text", "text": notice})
    return {"content": content, "structuredContent": document, "isError": False}


def _marker(whole: int, max_bytes: int, see_more: str) -> dict[str, Any]:
    return {"result_bytes": whole, "max_result_bytes": max_bytes, "see_more": see_more}


def _notice(whole: int, max_bytes: int, see_more: str) -> str:
    return (
        f"…[result clipped: {whole} bytes, over this server's limit of {max_bytes}; long "
        f"strings and lists are cut, each marked. The whole document, in a terminal: {see_more}]"
    )


def _stub(document: dict[str, Any], whole: int, max_bytes: int, see_more: str) -> dict[str, Any]:
    """The last resort: the marker and the document's top-level keys."""
    keys = [clip.text(str(k), 48) for k in list(document)[:32]]
    return {"result_truncated": _marker(whole, max_bytes, see_more), "keys": keys}
