"""Why an attempt ended, and whether running the same config again can help.

The agent knows facts no log contains, so it decides on them first:

1. a CANCEL request          -> ``cancelled``, never retried;
2. the host restarted        -> ``preempted``, retryable (the boot id changed under the attempt);
3. a kill the agent did not send (SIGKILL/SIGTERM/SIGHUP), of the job's process or of the
   first failing rank a launcher (torchrun, accelerate launch, deepspeed) names in its summary:
   if the cgroup ``oom_kill`` counter rose meanwhile, or the kernel log names that pid as an
   OOM victim (or, where the cgroup counter is unreadable, the host's counter rose), it was
   the kernel OOM killer (``host_oom``: the same config dies the same way, so no retry);
   with no such evidence something outside killed it (spot preemption, the platform, a
   user's ``kill -9``) -> ``preempted``, retryable. The other ranks' SIGTERMs and collective
   errors are the launcher's cascade, never the cause (``rgt.triage.launchers``). A job that
   SIGKILLs itself looks exactly like this from outside; the retry budget is what bounds it;
   a first failing rank that ended with an error of its own is classified from its own log
   (``logs/attempt-N/rank-R.log``), so a traceback on rank 1 gives rank 1's label, not the
   gloo/NCCL "connection closed" of the ranks that lost their peer;
4. everything else is read from the log tail by ``rgt.triage`` (the same rule base as
   ``rgt triage``); when no rule fires the verdict is ``unknown`` and nothing is retried. An
   uncaught exception in the user's own code is ``code_error``: the same code fails the same
   way, so it is never retried, whatever a rule file says. A label whose remedy is another
   machine (``gpu_hw``: the card is broken) is not retried here either: the agent can only
   rerun on this machine, which would run into the same broken GPU.
"""

from __future__ import annotations

import signal
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

if TYPE_CHECKING:
    from rgt.triage.launchers import RankFailure

EXTERNAL_KILLS = (int(signal.SIGKILL), int(signal.SIGTERM), int(signal.SIGHUP))

# Labels no rule may make retryable: a bug in the code reruns into the same bug.
NEVER_RETRIED = ("code_error",)
# Labels whose remedy is "retry on another machine": retryable, but never on this one.
RETRIED_ELSEWHERE = ("gpu_hw",)
NOT_HERE = "; not retried on this machine: the remedy is to move to another one"
REMEDY_PREEMPTED = "nothing to fix: the agent resumes from the newest checkpoint"
REMEDY_HOST_OOM = (
    "lower host RAM use: fewer DataLoader workers (size them from the cgroup memory limit), "
    "share big objects between workers, or rent a machine with more RAM"
)


class Decision(object):
    """The verdict on one ended attempt (same attribute names as ``rgt.triage.Verdict``)."""

    def __init__(
        self,
        label: str,
        retryable: bool,
        cause: str,
        remedy: str,
        evidence: Optional[List[str]] = None,
        cancelled: bool = False,
    ) -> None:
        self.label = label
        self.retryable = retryable
        self.cause = cause
        self.remedy = remedy
        self.evidence = list(evidence or [])
        self.cancelled = cancelled

    def to_json(self) -> Dict[str, Any]:
        return {
            "label": self.label,
            "retryable": self.retryable,
            "cause": self.cause,
            "remedy": self.remedy,
            "evidence": list(self.evidence),
        }


class AttemptFacts(object):
    """What the agent observed about one attempt."""

    def __init__(
        self,
        exit_code: Optional[int],
        signal_num: Optional[int],
        log_tail: str = "",
        agent_sent_signal: bool = False,
        cancel_requested: bool = False,
        boot_id_start: str = "",
        boot_id_now: str = "",
        oom_before: Optional[int] = None,
        oom_after: Optional[int] = None,
        pid: Optional[int] = None,
    ) -> None:
        self.exit_code = exit_code
        self.signal_num = signal_num
        self.log_tail = log_tail
        self.agent_sent_signal = agent_sent_signal
        self.cancel_requested = cancel_requested
        self.boot_id_start = boot_id_start
        self.boot_id_now = boot_id_now
        self.oom_before = oom_before
        self.oom_after = oom_after
        self.pid = pid  # the job's process (the launcher, for a launched job)
        self.host_oom_delta: Optional[int] = None  # /proc/vmstat oom_kill: the whole host
        self.kernel_oom: List[Tuple[int, str]] = []  # (victim pid, kernel log line)
        self.rank_tails: Dict[int, str] = {}  # rank -> the end of its own log
        self.rank_stderr: Dict[int, str] = {}  # local rank -> torchrun's copy of its stderr
        self.rank_error: Optional[Dict[str, Any]] = None  # torchrun's error file, reduced

    @property
    def oom_kills(self) -> int:
        if self.oom_before is None or self.oom_after is None:
            return 0
        return max(0, self.oom_after - self.oom_before)


def decide(facts: AttemptFacts) -> Decision:
    if facts.cancel_requested:
        cause = "cancelled on request (CANCEL file)"
        return Decision("cancelled", False, cause, "", cancelled=True)
    if facts.boot_id_start and facts.boot_id_now and facts.boot_id_start != facts.boot_id_now:
        evidence = ["boot id %s -> %s" % (facts.boot_id_start, facts.boot_id_now)]
        return Decision("preempted", True, "the host restarted", REMEDY_PREEMPTED, evidence)
    if facts.oom_kills:
        return _host_oom(["cgroup oom_kill rose by %d during the attempt" % facts.oom_kills])
    if facts.signal_num in EXTERNAL_KILLS and not facts.agent_sent_signal:
        oom = _oom_evidence(facts, facts.pid)
        return _host_oom(oom) if oom else _external_kill(facts.signal_num)
    from rgt.triage.launchers import first_failure

    rank = first_failure(facts.log_tail)
    if rank is None or facts.agent_sent_signal:
        return triage(facts)
    if rank.signal in EXTERNAL_KILLS:
        oom = _oom_evidence(facts, rank.pid, anywhere=rank.launcher == "srun")
        return _host_oom([rank.describe(), *oom]) if oom else _rank_killed(rank, facts)
    return _rank_failed(rank, facts)


def _oom_evidence(facts: AttemptFacts, pid: Optional[int], anywhere: bool = False) -> List[str]:
    """Evidence beyond the cgroup counter (``decide`` read that first) that the OOM killer
    took ``pid``: the kernel log naming it, or, where the cgroup counter cannot be read,
    the host's counter rising during the attempt. ``anywhere``: the process is not in the
    agent's tree or cgroup (srun's task, started by slurmstepd), so any OOM kill on the host
    during the attempt counts. Empty: no evidence of an OOM kill."""
    named = [line for victim, line in facts.kernel_oom if anywhere or victim == pid]
    if named:
        return ["kernel log: " + named[-1]]
    unreadable = facts.oom_before is None or facts.oom_after is None
    if (unreadable or anywhere) and facts.host_oom_delta:
        why = "srun's tasks are outside the agent's cgroup" if anywhere else (
            "the cgroup counter is unreadable here")  # fmt: skip
        return [
            "host oom_kill (/proc/vmstat) rose by %d during the attempt; %s"
            % (facts.host_oom_delta, why)
        ]
    return []


def _host_oom(evidence: List[str]) -> Decision:
    cause = "the kernel OOM killer ended a process of the job (host RAM / cgroup limit)"
    return Decision("host_oom", False, cause, REMEDY_HOST_OOM, evidence)


def _rank_failed(rank: "RankFailure", facts: AttemptFacts) -> Decision:
    """The first failing rank ended with an error of its own: its own log (or torchrun's
    error file) decides the label; the collective errors of the ranks that lost their peer
    are the cascade. Without a log of that rank, the whole focused log decides."""
    stderr = facts.rank_stderr.get(rank.local_rank) if rank.local_rank is not None else None
    own = facts.rank_tails.get(rank.rank) if rank.rank is not None else None
    error = facts.rank_error or {}
    text = stderr or own or str(error.get("traceback") or "")
    where = "its stderr" if stderr else "its own log" if own else "torchrun's error file"
    if text:
        alone = AttemptFacts(rank.exit_code, rank.signal, text, oom_before=0, oom_after=0)
        decision = triage(alone)
        if decision.label != "unknown":
            decision.evidence = [rank.describe() + ", read from " + where, *decision.evidence]
            return decision
    decision = triage(facts)
    decision.evidence = [rank.describe(), *decision.evidence]
    return decision


def _rank_killed(rank: "RankFailure", facts: AttemptFacts) -> Decision:
    """A launcher's first failing rank was killed by a signal nobody in the job sent. The OOM
    counter did not rise (``decide`` checked it first), so this is the same case as one process
    killed from outside: retryable, with the rank named. The log alone cannot tell an OOM kill
    from a ``kill -9`` (``rgt triage`` on a bare log says host_oom); the counter can."""
    name = _signal_name(rank.signal)
    cause = "%s was killed by %s from outside (spot preemption, the platform or a user)" % (
        _rank_words(rank),
        name,
    )
    if rank.launcher == "srun":  # its task is not in the agent's cgroup
        reading = "no kernel OOM line and no host oom_kill during the attempt"
    elif facts.oom_before is None or facts.oom_after is None:
        reading = "no cgroup oom_kill counter readable here"
    else:
        reading = "cgroup oom_kill unchanged (%d) during the attempt" % facts.oom_after
    evidence = [rank.describe(), reading]
    return Decision("preempted", True, cause, REMEDY_PREEMPTED, evidence)


def _rank_words(rank: "RankFailure") -> str:
    return "rank %s" % rank.rank if rank.rank is not None else "a rank (pid %s)" % rank.pid


def _external_kill(signal_num: Optional[int]) -> Decision:
    name = _signal_name(signal_num)
    cause = "killed by %s from outside the agent (spot preemption, the platform or a user)" % name
    evidence = ["%s, no cgroup oom_kill during the attempt" % name]
    return Decision("preempted", True, cause, REMEDY_PREEMPTED, evidence)


def _signal_name(signal_num: Optional[int]) -> str:
    try:
        return signal.Signals(signal_num or 0).name
    except ValueError:
        return "signal %s" % signal_num


def triage(facts: AttemptFacts) -> Decision:
    """Ask the shared rule base (always bundled with the agent); a rule that fails is
    ``unknown``, never a crash of the supervisor."""
    import rgt.triage

    context = {"oom_kill_delta": facts.oom_kills, "agent_sent_signal": facts.agent_sent_signal}
    try:
        verdict = rgt.triage.classify(facts.log_tail, facts.exit_code, facts.signal_num, context)
    except Exception as exc:  # a broken rule must not take the supervisor down
        return _unknown(facts, "triage failed: %s: %s" % (type(exc).__name__, exc))
    evidence = [str(item) for item in (verdict.evidence or [])]
    if verdict.label == "unknown":
        fallback = _unknown(facts, "no triage rule matched")
        fallback.evidence = evidence or fallback.evidence
        return fallback
    cause = str(verdict.cause or verdict.label)
    retryable = bool(verdict.retryable) and verdict.label not in NEVER_RETRIED
    if retryable and verdict.label in RETRIED_ELSEWHERE:
        retryable, cause = False, cause + NOT_HERE
    return Decision(str(verdict.label), retryable, cause, str(verdict.remedy), evidence)


def _unknown(facts: AttemptFacts, why: str) -> Decision:
    if facts.signal_num is not None:
        ended = "killed by %s" % _signal_name(facts.signal_num)
    else:
        ended = "exit code %s" % facts.exit_code
    cause = "the job failed (%s); %s" % (ended, why)
    remedy = "read the end of the attempt log and run `rgt triage`; it is not retried blindly"
    return Decision("unknown", False, cause, remedy, [ended])
