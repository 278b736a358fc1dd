"""Records, tables and images, checked with the standard library alone.

The agent on the machine has no pillow or pyarrow, and the agent and ``pull`` must give the same
verdict, so neither uses them: JSON is parsed (a NaN or inf constant in a metrics file is bad;
in a framework's own metadata file such as ``trainer_state.json`` it is noted), a CSV row shorter
than its header means a cut file, a PNG's every chunk CRC is checked up to ``IEND``, a JPEG must
end with its EOI marker, GIF, BMP and WebP with their trailer or declared size, and a parquet
file must carry its footer between the two ``PAR1`` magics. Each check returns a one-line
description or raises ``Bad``.
"""

from __future__ import annotations

import csv
import io
import json
import struct
import zlib
from typing import BinaryIO, Callable, Dict, List

from rgt.agent.verdicts._records import Bad

# Written by the frameworks, not by the user's metrics code: NaN in a logged loss is history.
METADATA_JSON = frozenset(
    {
        "trainer_state.json",
        "config.json",
        "generation_config.json",
        "adapter_config.json",
        "scheduler_config.json",
        "tokenizer_config.json",
        "special_tokens_map.json",
        "preprocessor_config.json",
    }
)


def _reject(name: str) -> float:
    raise Bad("non-standard JSON constant %s (a NaN or inf was written)" % name)


def check_json(data: bytes, name: str) -> str:
    found: List[str] = []

    def note(constant: str) -> float:
        found.append(constant)
        return float(constant.replace("Infinity", "inf"))

    metadata = name.lower() in METADATA_JSON or name.lower().endswith(".index.json")
    try:
        obj = json.loads(data.decode("utf-8"), parse_constant=note if metadata else _reject)
    except (ValueError, UnicodeDecodeError) as exc:
        raise Bad("invalid JSON: %s" % _short(exc)) from exc
    if obj in ({}, [], None, ""):
        raise Bad("JSON document is empty (%s)" % json.dumps(obj))
    size = "%d keys" % len(obj) if isinstance(obj, dict) else type(obj).__name__
    if found:
        return "valid JSON (%s); %d NaN/inf in framework metadata (normal)" % (size, len(found))
    return "valid JSON (%s)" % size


def check_jsonl(data: bytes, name: str) -> str:
    records = 0
    for number, line in enumerate(io.StringIO(data.decode("utf-8")), start=1):
        if not line.strip():
            continue
        try:
            json.loads(line, parse_constant=_reject)
        except Bad as exc:
            raise Bad("line %d: %s" % (number, exc)) from exc
        except ValueError as exc:
            raise Bad("line %d is not valid JSON: %s" % (number, _short(exc))) from exc
        records += 1
    if records == 0:
        raise Bad("no JSON records")
    return "%d JSON records" % records


def check_csv(data: bytes, name: str) -> str:
    reader = csv.reader(io.StringIO(data.decode("utf-8"), newline=""))
    header = next(reader, None)
    if header is None:
        raise Bad("CSV has no rows")
    rows = 0
    for number, row in enumerate(reader, start=2):
        if row and len(row) != len(header):
            raise Bad(
                "row %d has %d fields, the header %d; the file may be truncated"
                % (number, len(row), len(header))
            )
        rows += bool(row)
    if rows == 0:
        raise Bad("CSV has a header but no data rows")
    return "%d rows × %d columns" % (rows, len(header))


def check_png(handle: BinaryIO, size: int) -> str:
    if handle.read(8) != b"\x89PNG\r\n\x1a\n":
        raise Bad("not a PNG (bad signature)")
    chunks = 0
    while True:
        head = handle.read(8)
        if len(head) < 8:
            raise Bad("PNG ends before its IEND chunk (truncated)")
        length, kind = struct.unpack(">I4s", head)
        body, crc = handle.read(length), handle.read(4)
        if len(body) < length or len(crc) < 4:
            raise Bad("PNG chunk %r cut short (truncated)" % kind)
        if zlib.crc32(kind + body) != struct.unpack(">I", crc)[0]:
            raise Bad("PNG chunk %r fails its CRC (corrupted)" % kind)
        chunks += 1
        if kind == b"IEND":
            return "PNG, %d chunks, every CRC valid" % chunks


def _tail(handle: BinaryIO, size: int, count: int) -> bytes:
    handle.seek(max(0, size - count))
    return handle.read(count)


def check_image(handle: BinaryIO, size: int) -> str:
    head = handle.read(16)
    handle.seek(0)
    if head.startswith(b"\x89PNG"):
        return check_png(handle, size)
    if head.startswith(b"\xff\xd8"):
        if b"\xff\xd9" not in _tail(handle, size, 64):
            raise Bad("JPEG has no end-of-image marker (truncated)")
        return "JPEG, start and end markers present"
    if head[:6] in (b"GIF87a", b"GIF89a"):
        if not _tail(handle, size, 1) == b";":
            raise Bad("GIF has no trailer byte (truncated)")
        return "GIF, trailer present"
    if head.startswith(b"BM"):
        if struct.unpack("<I", head[2:6])[0] != size:
            raise Bad(
                "BMP declares %d bytes, the file has %d" % (struct.unpack("<I", head[2:6])[0], size)
            )
        return "BMP, size matches its header"
    if head.startswith(b"RIFF") and head[8:12] == b"WEBP":
        if struct.unpack("<I", head[4:8])[0] + 8 != size:
            raise Bad(
                "WebP declares %d bytes, the file has %d"
                % (struct.unpack("<I", head[4:8])[0] + 8, size)
            )
        return "WebP, size matches its header"
    if head[:4] in (b"II*\x00", b"MM\x00*"):
        return "TIFF header valid (pixels not decoded)"
    raise Bad("not an image this suffix promises (unknown signature)")


def check_parquet(handle: BinaryIO, size: int) -> str:
    head, tail = handle.read(4), _tail(handle, size, 8)
    if head != b"PAR1" or len(tail) < 8 or tail[4:] != b"PAR1":
        raise Bad("parquet magic missing at the start or end (truncated?)")
    footer = struct.unpack("<I", tail[:4])[0]
    if footer + 12 > size:
        raise Bad("parquet footer claims %d bytes, the file has %d" % (footer, size))
    return "parquet, footer of %d bytes intact (rows not decoded)" % footer


def _short(exc: BaseException, limit: int = 200) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= limit else text[: limit - 1] + "…"


TEXT_CHECKS: Dict[str, Callable[[bytes, str], str]] = {
    "json": check_json,
    "jsonl": check_jsonl,
    "csv": check_csv,
}
BINARY_CHECKS: Dict[str, Callable[[BinaryIO, int], str]] = {
    "image": check_image,
    "parquet": check_parquet,
}
