"""Per-rank logs and exit records of one attempt: ``logs/attempt-N/rank-R.log`` and ``ranks.json``.

The merged log (``logs/attempt-N.log``) stays what it always was: everything the launcher
printed. Lines that name their rank are also appended, without the prefix, to that rank's own
log while the job runs: torchrun's ``[rankR]:`` (``_launch`` asks for it) and torch's own
``[rankR]: `` before an uncaught traceback (any launcher). A line without a prefix (the
launcher's own) belongs to no rank. Nothing is guessed: a job whose
launcher prints no prefix gets no rank logs.

torchrun's own per-rank files (``attempt-N/torchrun/<run>/attempt_<k>/<local rank>/``, stdout
and stderr apart) are kept as it wrote them; the classifier reads a failing rank's stderr there,
where a traceback is never cut by the rank's stdout lines.

When the attempt ends, ``ranks.json`` records every rank the launcher's summary lists (exit
code or signal, pid, the first failure first) and the error file torchrun wrote, if any.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import re
from typing import IO, Any, Dict, List, Optional

from rgt import _fs

# "[rank3]:" (torchrun's prefix, which rgt asked for) possibly followed by torch's own
# "[rank3]: " before a traceback line; both name the same global rank.
_TORCH_PREFIX = re.compile(rb"^\[rank(\d+)\]:(?: ?\[rank\1\]:)? ?")
READ_CHUNK = 1 << 20
# Each rank's copy stops growing here (RGT_RANK_LOG_MAX_BYTES): torchrun keeps its own full
# per-rank files and the merged log has every line, so a chatty job's logs do not triple.
RANK_LOG_MAX_BYTES = 256 << 20
MAX_ERROR_FILE = 256 * 1024
TAIL_BYTES = 64 * 1024


def attempt_dir(logs_dir: str, attempt: int) -> str:
    return os.path.join(logs_dir, "attempt-%d" % attempt)


class RankLogs(object):
    """Follows the merged log of one attempt and appends each prefixed line to its rank's log."""

    def __init__(self, merged_log: str, directory: str, launcher: Optional[str]) -> None:
        self.merged_log = merged_log
        self.directory = directory
        self.launcher = launcher
        self.offset = _size(merged_log)  # a retry appends to nothing older than itself
        self.partial = b""
        self.files: Dict[int, IO[bytes]] = {}  # open while the attempt runs
        self.written: Dict[int, int] = {}
        self.max_bytes = int(_env_float("RGT_RANK_LOG_MAX_BYTES", RANK_LOG_MAX_BYTES))

    def follow(self) -> int:
        """Read (up to a chunk of) what the merged log gained since the last call; never
        raises. Returns the bytes read."""
        try:
            with open(self.merged_log, "rb") as handle:
                handle.seek(self.offset)
                data = handle.read(READ_CHUNK)
        except OSError:
            return 0
        self.offset += len(data)
        lines = (self.partial + data).split(b"\n")
        self.partial = lines.pop()
        for line in lines:
            self._route(line + b"\n")
        return len(data)

    def _route(self, line: bytes) -> None:
        found = _TORCH_PREFIX.match(line)
        if found is None:
            return
        rank, text = int(found.group(1)), line[found.end() :]
        written = self.written.get(rank, 0)
        if written >= self.max_bytes:
            return
        if written + len(text) > self.max_bytes:
            text = b"rgt-agent: this copy stops at %d bytes; every line is in the merged log\n" % (
                self.max_bytes
            )
            written = self.max_bytes - len(text)
        try:
            if rank not in self.files:
                os.makedirs(self.directory, exist_ok=True)
                self.files[rank] = open(self.path(rank), "ab")  # noqa: SIM115 (closed by close())
            self.files[rank].write(text)
            self.written[rank] = written + len(text)
        except OSError:
            return  # a full disk keeps the merged log (the job's own); rank copies are extra

    def path(self, rank: int) -> str:
        return os.path.join(self.directory, "rank-%d.log" % rank)

    def close(self) -> None:
        while self.follow():
            pass
        if self.partial:
            self._route(self.partial + b"\n")
            self.partial = b""
        for handle in self.files.values():
            with contextlib.suppress(OSError):
                handle.close()
        self.files = {}

    def tails(self) -> Dict[int, str]:
        """The last bytes of every rank's log, for the classifier."""
        return {rank: tail(self.path(rank)) for rank in self.ranks()}

    def ranks(self) -> List[int]:
        try:
            names = os.listdir(self.directory)
        except OSError:
            return []
        found = [re.match(r"rank-(\d+)\.log$", name) for name in names]
        return sorted(int(match.group(1)) for match in found if match)


def launcher_stderr(directory: str) -> Dict[int, str]:
    """local rank -> the end of its stderr as torchrun wrote it (``PET_LOG_DIR``): one stream,
    never interleaved with stdout, so a traceback there is whole. torchrun's own restarts
    (``--max-restarts``) make ``attempt_<k>`` folders; the newest is the one that failed."""
    runs = glob.glob(os.path.join(directory, "torchrun", "*", "attempt_*"))
    if not runs:
        return {}
    newest = max(runs, key=lambda path: int(path.rsplit("_", 1)[-1]))
    found = {}  # type: Dict[int, str]
    for path in glob.glob(os.path.join(newest, "*", "stderr.log")):
        local = os.path.basename(os.path.dirname(path))
        if local.isdigit():
            found[int(local)] = tail(path)
    return found


def write_record(directory: str, launcher: Optional[str], log_tail: str) -> Dict[str, Any]:
    """``ranks.json``: every rank the launcher's summary names, and torchrun's error file."""
    from rgt.triage.launchers import failures, first_failure

    listed = failures(log_tail)
    first = first_failure(log_tail)  # also deepspeed's "exits with return code", a bare line
    if first is not None and (not listed or listed[0].pid != first.pid):
        for entry in listed:
            entry.first = False
        listed = [first] + [entry for entry in listed if entry.pid != first.pid]
    record = {
        "launcher": launcher,
        "ranks": [entry.to_json() for entry in listed],
        "error_file": read_error_file(os.path.join(directory, "launcher-error.json")),
    }  # type: Dict[str, Any]
    if launcher is None and not listed and record["error_file"] is None:
        return record  # a plain process: nothing about ranks to keep
    try:
        os.makedirs(directory, exist_ok=True)
        _fs.atomic_write_json(os.path.join(directory, "ranks.json"), record)
    except OSError:
        pass
    return record


def read_error_file(path: str) -> Optional[Dict[str, Any]]:
    """torchrun's error file (``{"message": {"message": ..., "extraInfo": {"py_callstack":
    ...}}}``), reduced to the message and the traceback; None when none was written."""
    try:
        with open(path, "rb") as handle:
            doc = json.loads(handle.read(MAX_ERROR_FILE).decode("utf-8", "replace"))
    except (OSError, ValueError):
        return None
    message = doc.get("message") if isinstance(doc, dict) else None
    if isinstance(message, str):
        return {"message": message, "traceback": ""}
    if not isinstance(message, dict):
        return None
    extra = message.get("extraInfo") or {}
    return {
        "message": str(message.get("message") or ""),
        "traceback": str(extra.get("py_callstack") or "") if isinstance(extra, dict) else "",
    }


def tail(path: str) -> str:
    """The last ``TAIL_BYTES`` of a log as text; empty when it cannot be read."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - TAIL_BYTES))
            return handle.read().decode("utf-8", "replace")
    except OSError:
        return ""


def _env_float(name: str, default: float) -> float:
    try:
        return float(os.environ.get(name, default))
    except ValueError:
        return default


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0
