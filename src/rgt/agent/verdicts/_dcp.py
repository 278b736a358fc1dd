"""torch.distributed.checkpoint folders: ``.metadata`` plus ``__<rank>_<n>.distcp`` shards.

``.metadata`` is a pickle of DCP's metadata dataclasses (read as records, never constructed);
its ``storage_data`` maps every saved item to ``(relative_path, offset, length)`` in a shard.
A folder is complete when every shard the metadata names exists and holds every item's bytes.
Each item is a small torch zip archive inside its shard, read as one (``_torch.plan_zip``), so
a shard's tensors are scanned like any other torch file's.
"""

from __future__ import annotations

import os
from typing import Any, BinaryIO, Dict, List, Tuple

from rgt.agent.verdicts import _pickle, _stubs, _torch
from rgt.agent.verdicts._plan import Plan
from rgt.agent.verdicts._records import Bad

METADATA = ".metadata"
Item = Tuple[int, int, str]  # offset, length, fully qualified name


def shard_items(metadata_path: str) -> Dict[str, List[Item]]:
    """relative_path -> its items, from a DCP ``.metadata`` file (``Bad``/``HashOnly`` if it
    cannot be read)."""
    with open(metadata_path, "rb") as handle:
        data = handle.read()
    root = _pickle.skeleton(data)
    fields = root.fields() if isinstance(root, _stubs.Record) else {}
    storage = fields.get("storage_data")
    if not isinstance(storage, dict):
        raise Bad("DCP .metadata has no storage_data")
    shards: Dict[str, List[Item]] = {}
    for index, info in storage.items():
        where = info.fields() if isinstance(info, _stubs.Record) else {}
        path, offset, length = where.get("relative_path"), where.get("offset"), where.get("length")
        if not isinstance(path, str) or not isinstance(offset, int) or not isinstance(length, int):
            raise Bad("DCP .metadata: an item without relative_path/offset/length")
        if "/" in path or path in ("", ".", ".."):
            raise Bad("DCP .metadata names a shard outside its folder: %r" % path)
        shards.setdefault(path, []).append((offset, length, _fqn(index)))
    return shards


def _fqn(index: Any) -> str:
    fields = index.fields() if isinstance(index, _stubs.Record) else {}
    return str(fields.get("fqn", "?"))


def missing_shards(folder: str, shards: Dict[str, List[Item]]) -> List[str]:
    """Shards the metadata names that are absent or shorter than their items need."""
    out = []
    for name, items in sorted(shards.items()):
        path = os.path.join(folder, name)
        need = max(offset + length for offset, length, _ in items)
        if not os.path.isfile(path):
            out.append("%s is missing" % name)
        elif os.path.getsize(path) < need:
            out.append(
                "%s holds %d bytes, the metadata needs %d" % (name, os.path.getsize(path), need)
            )
    return out


def plan_shard(handle: BinaryIO, size: int, name: str, folder: str) -> Plan:
    """A ``.distcp`` shard, read through the items its folder's ``.metadata`` names."""
    meta = os.path.join(folder, METADATA)
    if not os.path.isfile(meta):
        raise Bad("a DCP shard without its folder's .metadata: nothing says what it holds")
    items = sorted(shard_items(meta).get(name, []))
    if not items:
        raise Bad("DCP .metadata does not name this shard")
    plan, end = Plan("dcp"), 0
    for offset, length, fqn in items:
        if offset < end or offset + length > size:
            raise Bad(
                "DCP item %s at %d+%d overlaps another or passes the end" % (fqn, offset, length)
            )
        end = offset + length
        _item(plan, handle, offset, length, fqn)
    plan.what = "DCP shard, %d items" % len(items)
    return plan


def _item(plan: Plan, handle: BinaryIO, offset: int, length: int, fqn: str) -> None:
    window = _torch.Window(handle, offset, length)
    if not _torch.is_zip(window.read(4)):
        plan.notes.append("item %s: raw bytes" % fqn) if len(plan.notes) < 1 else None
        return
    window.seek(0)
    sub = _torch.plan_zip(window, fqn, length, offset, fqn.split("."))  # type: ignore[arg-type]
    plan.spans.extend(sub.spans)
    plan.tensors += sub.tensors
    plan.values += sub.values
    plan.numbers += sub.numbers
    plan.bad_names.extend(sub.bad_names)
    plan.meta_names.extend(sub.meta_names)
