"""Byte-level damage to a checkpoint, and the agent-style manifest of a tree (stdlib only).

A truncated file is what a kill mid-write leaves; a flipped byte inside a tensor's storage is
what a bad disk or a broken transfer leaves, caught only by the hash the manifest recorded
before the flip.
"""

from __future__ import annotations

import hashlib
import json
import struct
import zipfile
from pathlib import Path
from typing import Any


def manifest(root: Path) -> dict[str, Any]:
    """The manifest the agent would write for every file under ``root`` (schema rgt.manifest/1)."""
    files = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        data = path.read_bytes()
        rel = path.relative_to(root).as_posix()
        files.append({"path": rel, "sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)})
    return {"schema": "rgt.manifest/1", "job_id": "corpus", "files": files}


def write_manifest(root: Path, doc: dict[str, Any]) -> Path:
    """Beside the tree, not in it: the tree holds exactly what the framework wrote."""
    path = root.parent / f"{root.name}.manifest.json"
    path.write_text(json.dumps(doc, indent=1))
    return path


def truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def storage_offset(path: Path) -> int:
    """The offset of the middle byte of the largest tensor storage in ``path``: the data block of
    a safetensors file, or the largest ``data/N`` record of a torch zip file (stored uncompressed).
    """
    with path.open("rb") as fh:
        head = fh.read(8)
        if not zipfile.is_zipfile(fh):
            (header_len,) = struct.unpack("<Q", head)
            start = 8 + header_len
            return start + (path.stat().st_size - start) // 2
    with zipfile.ZipFile(path) as zf:
        records = [i for i in zf.infolist() if "/data/" in i.filename and i.file_size > 0]
        info = max(records, key=lambda i: i.file_size)
    with path.open("rb") as fh:
        fh.seek(info.header_offset + 26)
        name_len, extra_len = struct.unpack("<HH", fh.read(4))
    return info.header_offset + 30 + name_len + extra_len + info.file_size // 2


def flip_byte(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x40  # a float's exponent bit at most offsets: a finite, wrong weight
    path.write_bytes(bytes(data))
