"""W&B offline run folders (``wandb/offline-run-*/``), read from the run's ``run-<id>.wandb`` log.

What this reads, honestly: wandb 0.2x+ (the Go ``wandb-core`` service) no longer writes
``files/wandb-summary.json`` or ``files/config.yaml`` for offline runs, and the Python SDK no
longer ships a reader for the log, so rgt reads the file itself: a LevelDB-style record log
(7-byte ``:W&B`` header, 32 KiB blocks, each record ``crc32 | length | type`` + payload) whose
payloads are ``wandb_internal_pb2.Record`` protobufs, decoded with wandb's own generated
classes. When the JSON files exist (older wandb, synced runs) they are not needed.

The log says how the run ended: an exit record (with the exit code) is written by
``run.finish()`` or at interpreter exit. A process killed with SIGKILL leaves no exit record,
and wandb-core writes the log in 32 KiB blocks, so the last rows may be lost with it.
"""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rgt.verify.tracker.record import Point, TrackedRun, flatten, sort_points

_BLOCK = 32768
_HEADER = struct.Struct("<IHB")  # crc32, payload length, chunk type
_FULL, _FIRST, _MIDDLE, _LAST = 1, 2, 3, 4
_INTERNAL = ("_step", "_timestamp", "_runtime", "_wandb")


def is_run_dir(path: Path, files: list[str]) -> bool:
    return any(name.startswith("run-") and name.endswith(".wandb") for name in files)


def records(data: bytes) -> Iterator[bytes]:
    """Payloads of the record log, in order; stops at the first torn or corrupt chunk."""
    if data[:4] != b":W&B":
        return
    pos, pending = 7, b""
    while pos + _HEADER.size <= len(data):
        if _BLOCK - pos % _BLOCK < _HEADER.size:  # the block's tail is padding
            pos += _BLOCK - pos % _BLOCK
            continue
        crc, length, kind = _HEADER.unpack_from(data, pos)
        chunk = data[pos + _HEADER.size : pos + _HEADER.size + length]
        if len(chunk) < length or zlib.crc32(chunk, zlib.crc32(bytes([kind]))) != crc:
            return
        pos += _HEADER.size + length
        pending = chunk if kind in (_FULL, _FIRST) else pending + chunk
        if kind in (_FULL, _LAST):
            yield pending


def read(folder: Path) -> TrackedRun:
    from wandb.proto import wandb_internal_pb2

    state = _State()
    for log in sorted(folder.glob("run-*.wandb")):
        for payload in records(log.read_bytes()):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(payload)
            state.apply(record)
    return state.to_run(folder)


def _key(item: Any) -> str:
    return ".".join(item.nested_key) if item.nested_key else str(item.key)


def _number(value_json: str) -> float | None:
    try:
        value = json.loads(value_json)
    except ValueError:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


class _State:
    """Folds the log's records into the run's final state, in the order wandb wrote them."""

    def __init__(self) -> None:
        self.run_id = self.name = ""
        self.config: dict[str, Any] = {}
        self.summary: dict[str, float] = {}
        self.history: dict[str, list[Point]] = {}
        self.start: float | None = None
        self.exit_code: int | None = None
        self.runtime = 0.0

    def apply(self, record: Any) -> None:
        kind = record.WhichOneof("record_type")
        if kind == "run":
            self._run(record.run)
        elif kind == "config":
            self._config(record.config.update)
        elif kind == "history":
            self._history(record.history)
        elif kind == "summary":
            self._summary(record.summary.update)
        elif kind == "exit":
            self.exit_code, self.runtime = record.exit.exit_code, float(record.exit.runtime)

    def _run(self, run: Any) -> None:
        self.run_id, self.name = run.run_id, run.display_name
        self.start = run.start_time.seconds + run.start_time.nanos / 1e9 or None
        self._config(run.config.update)

    def _config(self, updates: Any) -> None:
        for item in updates:
            key = _key(item)
            if not key.startswith("_wandb"):
                self.config[key] = json.loads(item.value_json)

    def _history(self, history: Any) -> None:
        row = {_key(item): item.value_json for item in history.item}
        step = int(_number(row.get("_step", "")) or history.step.num)
        stamp = _number(row.get("_timestamp", ""))
        for key, text in row.items():
            value = _number(text)
            if value is not None and not key.startswith(_INTERNAL):
                self.history.setdefault(key, []).append(Point(step, value, stamp))

    def _summary(self, updates: Any) -> None:
        for item in updates:
            key, value = _key(item), _number(item.value_json)
            if value is not None and not key.startswith(_INTERNAL):
                self.summary[key] = value

    def to_run(self, folder: Path) -> TrackedRun:
        if self.exit_code is None:
            status, raw = "running", "no exit record"
        else:
            status = "finished" if self.exit_code == 0 else "failed"
            raw = f"exit code {self.exit_code}"
        end = self.start + self.runtime if self.start and self.exit_code is not None else None
        return TrackedRun(
            source="wandb",
            run_id=self.run_id or folder.name.rsplit("-", 1)[-1],
            name=self.name,
            status=status,
            raw_status=raw,
            path=str(folder),
            config=flatten(self.config),
            summary=self.summary,
            history={key: sort_points(points) for key, points in self.history.items()},
            start_time=self.start,
            end_time=end,
        )
