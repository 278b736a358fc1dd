"""A launched job whose log stalled: which rank is stuck, and where every other rank waits.

A distributed hang looks the same from outside whatever its cause: every rank alive, no output.
Usually one rank stopped calling collectives (a slow or stuck data read, a ``time.sleep``, a
collective inside ``if rank == 0``, a dead peer on another node) and the others wait for it in
``all_reduce``/``barrier`` until the collective timeout (30 min by default) ends them all with
an error that names none of this (catalog D19-D21, MN3). ``py-spy dump`` reads each rank's
Python stack without stopping it for long; the rank that is *not* inside a
``torch.distributed`` call is the one the others wait for.

The ranks are the job's descendant processes that carry ``RANK`` in their environment (as
every launcher sets it) and whose parent does not carry the same ``RANK`` (a DataLoader worker
inherits it). py-spy is looked for on the job's ``PATH``, beside the agent's Python and on the
agent's ``PATH``; without it the event says so and how to get it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from typing import Any, Dict, List, Optional, Tuple

from rgt import _fs

DUMP_TIMEOUT_S = 20.0
# Frames of torch.distributed that are no wait for a peer: c10d_logger's decorator, and a
# module body (a rank still importing torch.distributed is slow, not waiting).
NOT_A_CALL = ("wrapper", "<module>")
NO_PY_SPY = (
    "py-spy is not installed on the machine: `pip install py-spy` in the job's environment "
    "names the stuck rank next time; now: `rgt cancel` the job or wait for the collective timeout"
)


def rank_processes(root: int) -> Dict[int, int]:
    """rank -> pid of every rank process started under ``root`` (the job's process).
    torchrun starts each rank in a session of its own, so they are found as descendants, not
    as members of the job's process group."""
    procs = {}  # type: Dict[int, Tuple[int, Optional[str]]]
    for name in os.listdir("/proc"):
        if name.isdigit():
            found = _process(int(name))
            if found is not None:
                procs[int(name)] = found
    ranks = {}  # type: Dict[int, int]
    for pid in sorted(_descendants(root, procs)):
        parent, rank = procs[pid]
        inherited = parent in procs and procs[parent][1] == rank
        if rank is not None and rank.isdigit() and not inherited:
            ranks.setdefault(int(rank), pid)
    return ranks


def _descendants(root: int, procs: Dict[int, Tuple[int, Optional[str]]]) -> List[int]:
    children = {}  # type: Dict[int, List[int]]
    for pid, (parent, _rank) in procs.items():
        children.setdefault(parent, []).append(pid)
    found, todo = [], [root]  # type: List[int], List[int]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return [pid for pid in found if pid in procs]


def _process(pid: int) -> Optional[Tuple[int, Optional[str]]]:
    """(parent pid, RANK) of a live process, else None."""
    try:
        with open("/proc/%d/stat" % pid, "r", encoding="utf-8", errors="replace") as handle:
            fields = handle.read().rsplit(")", 1)[-1].split()
        if len(fields) < 2 or fields[0] in ("Z", "X"):
            return None
        with open("/proc/%d/environ" % pid, "rb") as handle:
            environ = handle.read().split(b"\0")
    except (OSError, ValueError):
        return None
    rank = [item[5:].decode("ascii", "replace") for item in environ if item.startswith(b"RANK=")]
    return int(fields[1]), (rank[0] if rank else None)


def find_py_spy(job_path: str = "") -> Optional[str]:
    """``RGT_PY_SPY`` (a path; empty: never dump) in the agent's environment wins."""
    chosen = os.environ.get("RGT_PY_SPY")
    if chosen is not None:
        return chosen if chosen and os.access(chosen, os.X_OK) else None
    beside = os.path.join(os.path.dirname(sys.executable), "py-spy")
    if os.access(beside, os.X_OK):
        return beside
    return shutil.which("py-spy", path=job_path or None) or shutil.which("py-spy")


def dump(py_spy: str, pid: int) -> Tuple[Optional[List[Dict[str, Any]]], str]:
    """py-spy's JSON dump of one process: (threads, "") or (None, why not)."""
    argv = [py_spy, "dump", "--pid", str(pid), "--json"]
    try:
        done = subprocess.run(argv, capture_output=True, timeout=DUMP_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, "%s: %s" % (type(exc).__name__, exc)
    if done.returncode != 0:
        return None, done.stderr.decode("utf-8", "replace").strip()[-300:]
    try:
        threads = json.loads(done.stdout.decode("utf-8", "replace"))
    except ValueError:
        return None, "py-spy printed no JSON"
    return (threads, "") if isinstance(threads, list) else (None, "py-spy printed no list")


def position(threads: List[Dict[str, Any]]) -> Dict[str, Any]:
    """Where the main thread is: the torch.distributed call it waits in (if any), its
    innermost frame, and the innermost frame of the user's own code."""
    main = [t for t in threads if t.get("thread_name") == "MainThread"] or threads[:1]
    frames = [f for f in (main[0].get("frames") or []) if isinstance(f, dict)] if main else []
    calls = [f for f in frames if "torch/distributed/" in str(f.get("filename") or "")]
    calls = [f for f in calls if f.get("name") not in NOT_A_CALL]
    importing = any("importlib" in str(f.get("filename") or "") for f in frames)
    collective = str(calls[0].get("name")) if calls and not importing else None  # innermost
    own = [f for f in frames if not _library(str(f.get("filename") or ""))]
    return {
        "collective": collective,
        "at": _frame(frames[0]) if frames else None,
        "code": _frame(own[0]) if own else None,
    }


def _library(filename: str) -> bool:
    """Installed packages and the standard library (the job's Python may not be ours)."""
    return "-packages/" in filename or "/lib/python3" in filename or filename.startswith("<")


def _frame(frame: Dict[str, Any]) -> str:
    name = frame.get("short_filename") or frame.get("filename")
    return "%s (%s:%s)" % (frame.get("name"), name, frame.get("line"))


def diagnose(root: int, directory: str, job_path: str = "") -> Tuple[Dict[str, Any], str]:
    """The ``ranks_hung`` event's detail and next step for the job started as ``root``."""
    ranks = rank_processes(root)
    py_spy = find_py_spy(job_path)
    if not ranks:
        return {"ranks": []}, ""
    if py_spy is None:
        return {"ranks": sorted(ranks), "py_spy": None, "dumped": False}, NO_PY_SPY
    places = {}  # type: Dict[int, Dict[str, Any]]
    raw = {}  # type: Dict[str, Any]
    for rank, pid in sorted(ranks.items()):
        threads, why = dump(py_spy, pid)
        raw[str(rank)] = threads if threads is not None else why
        places[rank] = dict(position(threads), pid=pid) if threads else {"pid": pid, "error": why}
    _save(directory, raw)
    detail, next_step = verdict(places, py_spy)
    detail["stacks"] = os.path.join(directory, "stacks.json")
    return detail, next_step


def verdict(places: Dict[int, Dict[str, Any]], py_spy: str) -> Tuple[Dict[str, Any], str]:
    waiting = sorted(r for r, p in places.items() if p.get("collective"))
    elsewhere = sorted(r for r, p in places.items() if not p.get("collective") and "at" in p)
    detail = {
        "odd_ones_out": [] if waiting else odd_ones_out(places),
        "py_spy": py_spy,
        "dumped": True,
        "ranks": sorted(places),
        "in_collective": waiting,
        "not_in_collective": elsewhere,
        "stuck": elsewhere if waiting else [],
        "positions": {str(rank): places[rank] for rank in sorted(places)},
    }  # type: Dict[str, Any]
    return detail, _next_step(detail)


def odd_ones_out(places: Dict[int, Dict[str, Any]]) -> List[int]:
    """With three ranks or more and none inside a torch.distributed call (NCCL's collectives
    are asynchronous: a rank waiting for a peer blocks at its next GPU sync, ``loss.item()``,
    in its own code), the ranks whose line differs from the one most others share."""
    lines = {rank: place.get("code") or place.get("at") for rank, place in places.items()}
    counts = {}  # type: Dict[Any, int]
    for line in lines.values():
        counts[line] = counts.get(line, 0) + 1
    if len(lines) < 3 or len(counts) < 2:
        return []
    ranked = sorted(counts.values(), reverse=True)
    if ranked[0] == ranked[1] or ranked[0] * 2 <= len(lines):
        return []  # no clear majority: nothing to single out
    common = max(counts, key=lambda line: counts[line])
    return sorted(rank for rank, line in lines.items() if line != common)


def _next_step(detail: Dict[str, Any]) -> str:
    places = detail["positions"]
    if detail["stuck"]:
        where = "; ".join(
            "rank %d at %s" % (r, places[str(r)].get("code") or places[str(r)].get("at"))
            for r in detail["stuck"]
        )
        waits = sorted({str(places[str(r)]["collective"]) for r in detail["in_collective"]})
        return (
            "%s: it never reached the collective that rank(s) %s wait in (%s); fix what "
            % (
                where,
                ", ".join(str(r) for r in detail["in_collective"]),
                ", ".join(waits),
            )
            + "holds it there (data, I/O, a collective under `if rank == 0`), then `rgt cancel`"
        )
    if detail["in_collective"]:
        return (
            "every rank waits in a collective: a peer on another node, or ranks calling "
            "different collectives (TORCH_DISTRIBUTED_DEBUG=DETAIL names them); `rgt cancel`"
        )
    if detail["odd_ones_out"]:
        places_said = "; ".join(
            "rank %d at %s" % (r, places[str(r)].get("code") or places[str(r)].get("at"))
            for r in detail["odd_ones_out"]
        )
        return (
            "no rank is inside a torch.distributed call, and %s, not where the others are: "
            "with NCCL the others wait at their next GPU sync; look there first" % places_said
        )
    return (
        "no rank is inside a torch.distributed call: the job is slow or stuck in its own code, "
        "or (NCCL) the ranks wait at a GPU sync for a peer; compare the positions in stacks.json"
    )


def _save(directory: str, raw: Dict[str, Any]) -> None:
    try:
        os.makedirs(directory, exist_ok=True)
        _fs.atomic_write_json(os.path.join(directory, "stacks.json"), raw)
    except (OSError, TypeError, ValueError):
        pass
