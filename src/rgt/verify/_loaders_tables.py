"""Loaders of records and tables: JSON (NaN/inf constants rejected), JSON lines, CSV (a row
shorter than the header means a cut file), images (every pixel decoded) and parquet (when
pyarrow is there). Each returns a one-line description or raises ``BadArtifact``; what every
loader raises (here and in ``rgt.verify._loaders``) is defined here."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any


class BadArtifact(Exception):
    """The artifact failed its load check; the message is the reason shown to the user."""


class NotChecked(Exception):
    """No loader can read this kind here (e.g. parquet without pyarrow): fall back to the hash."""


def short(exc: BaseException, limit: int = 200) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _reject_constant(name: str) -> float:
    raise BadArtifact(f"non-standard JSON constant {name} (a NaN or inf was written)")


def _parse_json(text: str) -> Any:
    return json.loads(text, parse_constant=_reject_constant)


def load_json(path: Path) -> str:
    try:
        obj = _parse_json(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadArtifact(f"invalid JSON: {short(exc)}") from exc
    if obj in ({}, [], None, ""):
        raise BadArtifact(f"JSON document is empty ({json.dumps(obj)})")
    size = f"{len(obj)} keys" if isinstance(obj, dict) else type(obj).__name__
    return f"valid JSON ({size})"


def load_jsonl(path: Path) -> str:
    records = 0
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                _parse_json(line)
            except ValueError as exc:
                raise BadArtifact(f"line {number} is not valid JSON: {short(exc)}") from exc
            records += 1
    if records == 0:
        raise BadArtifact("no JSON records")
    return f"{records} JSON records"


def load_csv(path: Path) -> str:
    with path.open(encoding="utf-8", newline="") as handle:
        reader = csv.reader(handle)
        header = next(reader, None)
        if header is None:
            raise BadArtifact("CSV has no rows")
        rows = 0
        for number, row in enumerate(reader, start=2):
            if row and len(row) != len(header):
                raise BadArtifact(
                    f"row {number} has {len(row)} fields, the header {len(header)}; "
                    "the file may be truncated"
                )
            rows += bool(row)
    if rows == 0:
        raise BadArtifact("CSV has a header but no data rows")
    return f"{rows} rows × {len(header)} columns"


def load_image(path: Path) -> str:
    from PIL import Image

    try:
        with Image.open(path) as image:
            image.load()  # decodes every pixel: catches truncated files that verify() misses
            width, height, mode = image.width, image.height, image.mode
    except Exception as exc:
        raise BadArtifact(f"image failed to decode: {short(exc)}") from exc
    if width * height == 0:
        raise BadArtifact(f"image has zero size ({width}×{height})")
    return f"{width}×{height} {mode} image"


def load_parquet(path: Path) -> str:
    try:
        import pyarrow.parquet as pq  # type: ignore[import-not-found, unused-ignore]
    except ImportError as exc:
        raise NotChecked("pyarrow not installed, parquet not load-checked") from exc
    try:
        table = pq.read_table(path)
    except Exception as exc:
        raise BadArtifact(f"parquet failed to load: {short(exc)}") from exc
    if table.num_rows == 0:
        raise BadArtifact("parquet table has no rows")
    return f"{table.num_rows} rows × {table.num_columns} columns"
