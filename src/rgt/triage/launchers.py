"""What a launcher says about its ranks: the first rank that failed, and the cascade after it.

``torchrun`` (and ``accelerate launch`` and ``python -m torch.distributed.run``, which are the
same elastic agent) ends a failed group with a ``ChildFailedError`` summary: a ``Failures:``
list of every other rank and a ``Root Cause (first observed failure)`` block naming the first
rank that ended, its exit code (negative for a signal), its pid and, when the script was wrapped
in ``@record``, an error file. Once one rank has died, torchrun SIGTERMs the others ("Sending
process N closing signal SIGTERM") and they fail with collective errors (gloo "Connection closed
by peer", NCCL watchdog timeouts): that cascade is never the root cause. A rule that reads the
whole tail sees the survivors' SIGTERM first and calls the job "preempted" although one rank was
SIGKILLed; ``focus`` removes the cascade so the rules read the first failure, and ``root_cause``
hands the agent the failed rank so it can decide from its own evidence (the cgroup OOM counter).

Deepspeed's launcher reports each child as "process N exits with return code = C"; srun a task
that a signal ended as "srun: error: NODE: task N: Killed".

This module is bundled into the agent zipapp: stdlib only, Python >= 3.8.
"""

from __future__ import annotations

import re
import signal as signals
from typing import Any

_ROOT = re.compile(r"Root Cause \(first observed failure\)\s*:", re.IGNORECASE)
_FAILURES = re.compile(r"^\s*Failures\s*:\s*$", re.IGNORECASE | re.MULTILINE)
_RANK = re.compile(r"\brank\s*:?\s*(\d+)\s*\(local[ _]rank\s*:\s*(\d+)\)", re.IGNORECASE)
_EXIT = re.compile(r"\bexitcode\s*:\s*(-?\d+)(?:\s*\(pid\s*:\s*(\d+)\))?", re.IGNORECASE)
_ERROR_FILE = re.compile(r"\berror[ _]file\s*:\s*(\S+)", re.IGNORECASE)
_TRACEBACK = re.compile(r"\btraceback\s*:\s*(.+)", re.IGNORECASE)
_TIME = re.compile(r"^\s*time\s*:\s*(\S+)", re.IGNORECASE | re.MULTILINE)
# The elastic agent's log line for the first child it saw end, printed before the summary.
_FAILED_LINE = re.compile(
    r"failed \(exitcode: (-?\d+)\) local_rank: (\d+) \(pid: (\d+)\) of binary", re.IGNORECASE
)
_DEEPSPEED = re.compile(r"process (\d+) exits with return code = (-?\d+)")
# deepspeed >= 0.10 names the child by its command: "[..., '--local_rank=1'] exits with ...";
# its pid is on the "process N spawned with command: [..., '--local_rank=1']" line.
_DEEPSPEED_CMD = re.compile(r"--local_rank=(\d+)'\] exits with return code = (-?\d+)")
_DEEPSPEED_SPAWN = re.compile(r"process (\d+) spawned with command: .*--local_rank=(\d+)'\]")
# srun's line for tasks that SIGKILL ended ("tasks 0-3" for several). An OOM kill in the step's
# cgroup reads otherwise ("task 0: Out Of Memory", slurmstepd's "Detected 1 oom-kill event(s)").
_SRUN_KILLED = re.compile(
    r"^srun: error: (\S+): tasks? (\d+)(?:[-,][\d,-]*)?: Killed[ \t]*$", re.MULTILINE
)
# slurmstepd tells srun (so the merged log) of an OOM kill in the step's cgroup on any node.
STEPD_OOM = re.compile(r"Detected \d+ oom[-_ ]kill event\(s\)[^\n]*")
# torchrun's own SIGTERM to the surviving ranks once one has failed. Any other signal on that
# line (SIGHUP, SIGINT) is one the elastic agent itself received and forwards to its ranks:
# the cause, not the cascade (a SIGHUP is the ssh session that went away).
_CLOSING = re.compile(r"Sending process \d+ closing signal SIGTERM\b")
_BLOCK_END = re.compile(r"^\s*={5,}\s*$", re.MULTILINE)
# "[rank1]:" (torchrun's prefix as rgt's agent asks for it), torch's own "[rank1]: " before
# a traceback, or both; torchrun's default "[default1]:" (role and local rank).
_PREFIX = re.compile(r"^(?:\[(?:rank|default)\d+\]: ?)+", re.MULTILINE)
# torchrun's (or accelerate's) own traceback ending in ChildFailedError: the launcher
# reporting that a rank failed, never a cause. Removed only where the ranks' lines carry
# prefixes, so that the rank's own traceback is there to be read instead.
_LAUNCHER_TRACEBACK = re.compile(
    r"^Traceback \(most recent call last\):\n(?:[ \t].*\n)*?"
    r"torch\.distributed\.elastic\.multiprocessing\.errors\.ChildFailedError:.*$",
    re.MULTILINE,
)
_NAMES = re.compile(r"^\[((?:rank|default)\d+)\]: ?")
_PREFIX_SPAN = 40  # the prefixes sit at the start of a line
_ENTRY = re.compile(r"^\s*\[\d+\]\s*:\s*$", re.MULTILINE)  # "[1]:" opens one rank's entry


class RankFailure:
    """The first failing rank, as the launcher reported it."""

    def __init__(
        self,
        launcher: str,
        rank: int | None,
        local_rank: int | None,
        exit_code: int | None,
        pid: int | None,
        error_file: str = "",
        traceback: str = "",
        first: bool = True,
        time: str = "",
    ) -> None:
        self.launcher = launcher
        self.rank = rank
        self.local_rank = local_rank
        self.exit_code = exit_code
        self.pid = pid
        self.error_file = error_file
        self.traceback = traceback
        self.first = first  # the launcher's root cause, not one of the ranks that went after it
        self.time = time  # the summary's "time" (one-second resolution), "" when not printed
        self.note = ""

    @property
    def signal(self) -> int | None:
        """The signal that ended the rank (a negative exit code), or None."""
        if self.exit_code is not None and self.exit_code < 0:
            return -self.exit_code
        return None

    def describe(self) -> str:
        who = f"rank {'?' if self.rank is None else self.rank}"
        if self.local_rank is not None and self.local_rank != self.rank:
            who += f" (local rank {self.local_rank})"
        if self.pid is not None:
            who += f", pid {self.pid}"
        if self.signal is not None:
            how = f"killed by {signal_name(self.signal)}"
        else:
            how = f"exit code {self.exit_code}"
        said = f"{self.launcher}: {'first failing ' if self.first else ''}{who}, {how}"
        return said + self.note

    def to_json(self) -> dict[str, object]:
        return {
            "rank": self.rank,
            "local_rank": self.local_rank,
            "pid": self.pid,
            "exit_code": self.exit_code,
            "signal": signal_name(self.signal) if self.signal is not None else None,
            "first": self.first,
            "error_file": self.error_file or None,
            "note": self.note.strip(" ()") or None,
        }


def signal_name(number: int) -> str:
    try:
        return signals.Signals(number).name
    except ValueError:
        return f"signal {number}"


def root_cause(text: str) -> RankFailure | None:
    """The first failing rank named in a launcher's output, or None when no launcher spoke."""
    found = _from_summary(text)
    if found is not None:
        return found
    line = _FAILED_LINE.search(text)
    if line is not None:
        code, local, pid = (int(group) for group in line.groups())
        return RankFailure("torchrun", None, local, code, pid)
    return _from_deepspeed(text) or _from_srun(text)


def _from_summary(text: str) -> RankFailure | None:
    starts = list(_ROOT.finditer(text))
    if not starts:
        return None
    block = text[starts[-1].end() :]
    end = _BLOCK_END.search(block)
    block = block[: end.start()] if end else block[:2000]
    exit_match = _EXIT.search(block)
    if exit_match is None:
        return None
    rank = _RANK.search(block)
    error_file = _ERROR_FILE.search(block)
    traceback = _TRACEBACK.search(block)
    when = _TIME.search(block)
    return RankFailure(
        "torchrun",
        int(rank.group(1)) if rank else None,
        int(rank.group(2)) if rank else None,
        int(exit_match.group(1)),
        int(exit_match.group(2)) if exit_match.group(2) else None,
        _known(error_file.group(1)) if error_file else "",
        traceback.group(1).strip() if traceback else "",
        time=when.group(1) if when else "",
    )


def failures(text: str) -> list[RankFailure]:
    """Every rank the last launcher summary lists, the first failure first: torchrun's
    ``Root Cause`` entry, then its ``Failures:`` entries (the ranks it SIGTERMed, or that
    failed after it). Empty when no summary was printed."""
    starts = list(_ROOT.finditer(text))
    if not starts:
        return []
    root = _from_summary(text)
    found = [root] if root is not None else []
    listed = list(_FAILURES.finditer(text, 0, starts[-1].start()))
    if listed:
        others = text[listed[-1].end() : starts[-1].start()]
        found.extend(_entries(others))
    return found


def _entries(block: str) -> list[RankFailure]:
    entries: list[RankFailure] = []
    for part in _ENTRY.split(block)[1:]:
        exit_match = _EXIT.search(part)
        if exit_match is None:
            continue
        rank = _RANK.search(part)
        when = _TIME.search(part)
        entries.append(
            RankFailure(
                "torchrun",
                int(rank.group(1)) if rank else None,
                int(rank.group(2)) if rank else None,
                int(exit_match.group(1)),
                int(exit_match.group(2)) if exit_match.group(2) else None,
                first=False,
                time=when.group(1) if when else "",
            )
        )
    return entries


def first_failure(text: str) -> RankFailure | None:
    """The rank whose end started the group's failure. Usually torchrun's ``Root Cause``; but
    torchrun orders failures by a timestamp of whole seconds and breaks ties by the lowest
    rank, so a rank that died of its peer's SIGKILL within the same second can be named
    first. torchrun itself SIGTERMs the survivors, so a SIGKILLed rank listed in the same
    second as a root cause that merely exited is the real first failure."""
    root = root_cause(text)
    if root is None or root.signal is not None or not root.time:
        return root
    for other in failures(text)[1:]:
        if other.signal == signals.SIGKILL and other.time == root.time:
            other.first = True
            other.note = (
                f" (torchrun named rank {root.rank}, exit code {root.exit_code}, in the same "
                "second: its order has one-second resolution)"
            )
            return other
    return root


def _known(value: str) -> str:
    return "" if value.strip("<>").upper() == "N/A" else value


def _from_deepspeed(text: str) -> RankFailure | None:
    """deepspeed's launcher reports the child whose end made it kill the others. Its
    ``--local_rank`` is the rank on one node (the only case rgt runs it in)."""
    for match in _DEEPSPEED.finditer(text):
        code = int(match.group(2))
        if code != 0:
            return RankFailure("deepspeed", None, None, code, int(match.group(1)))
    for match in _DEEPSPEED_CMD.finditer(text):
        local, code = int(match.group(1)), int(match.group(2))
        if code != 0:
            pids = {int(m.group(2)): int(m.group(1)) for m in _DEEPSPEED_SPAWN.finditer(text)}
            return RankFailure("deepspeed", local, local, code, pids.get(local))
    return None


def _from_srun(text: str) -> RankFailure | None:
    """srun's task killed by SIGKILL (its pid is on another process tree: not known here)."""
    match = _SRUN_KILLED.search(text)
    if match is None or STEPD_OOM.search(text):
        return None
    found = RankFailure("srun", int(match.group(2)), None, -int(signals.SIGKILL), None)
    found.note = f" on {match.group(1)}"
    return found


def focus(text: str) -> str:
    """The log without the launcher's cascade: the other ranks' entries of the ``Failures:``
    list and torchrun's own "closing signal" lines; and without the rank prefixes of its
    lines (torch's ``[rank1]: `` before a traceback, torchrun's ``--tee`` prefix), which
    would hide a traceback from the rules that read a line from its start. Text without a
    launcher summary or prefixes is returned unchanged."""
    if _PREFIX.search(text):
        text = _PREFIX.sub("", _first_rank_only(_LAUNCHER_TRACEBACK.sub("", text)))
    if not _ROOT.search(text) and not _CLOSING.search(text):
        return text
    kept: list[str] = []
    in_failures = False
    for line in text.splitlines(True):
        if _FAILURES.match(line):
            in_failures = True
            continue
        if in_failures and (_ROOT.search(line) or _BLOCK_END.match(line)):
            in_failures = False
        if in_failures or _CLOSING.search(line):
            continue
        kept.append(line)
    return "".join(kept)


def _first_rank_only(text: str) -> str:
    """Drop the lines other ranks printed (their prefix names them) when the launcher named
    the first failing rank: their tracebacks are the cascade ("Connection closed by peer")."""
    first = root_cause(text)
    if first is None or first.rank is None:
        return text
    keep = {f"rank{first.rank}", f"default{first.local_rank}"}
    kept = []
    for line in text.splitlines(True):
        names = _NAMES.findall(line[:_PREFIX_SPAN])
        if not names or any(name in keep for name in names):
            kept.append(line)
    return "".join(kept)


def agent_findings(events: list[dict[str, Any]], attempt: int) -> dict[str, Any]:
    """What the agent recorded about attempt ``attempt`` of a launched job, for ``rgt triage
    JOB``: its verdict when the launcher named the ranks (the agent read evidence no log
    holds: the OOM counters, the failing rank's own log), the first failing rank, where the
    rank logs are, and the last hang dump (``ranks_hung``) of the attempt."""
    found: dict[str, Any] = {"first_failing_rank": None, "ranks": [], "decision": None}
    found["hang"] = None
    for event in events:
        if event.get("attempt") != attempt or not isinstance(event.get("detail"), dict):
            continue
        detail = event["detail"]
        if event.get("kind") == "ranks_hung":
            found["hang"] = dict(detail, next=event.get("next"), time=event.get("time"))
        if event.get("kind") == "attempt_ended" and detail.get("ranks"):
            found["ranks"] = list(detail["ranks"])
            found["first_failing_rank"] = detail["ranks"][0]
            found["rank_logs"] = detail.get("rank_logs")
            keys = ("label", "retryable", "cause", "remedy", "evidence")
            found["decision"] = {key: detail.get(key) for key in keys}
    return found
