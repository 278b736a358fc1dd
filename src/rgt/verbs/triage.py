"""``rgt triage LOGFILE|JOB``: one label for a failure, with its cause, remedy and whether a
retry can help (``rgt.triage``), as the CLI prints it and the MCP ``triage`` tool returns it.

The target is a log file, or a JOB id: then the last attempt's log tail and exit status are read
from the job's machine, and the agent's own findings (the first failing rank, a hang dump) win
over the merged log. The user's learned rules (``$RGT_HOME/rules/``) join the bundled ones, and
each verdict counts one fire of its rule (``$RGT_HOME/triage-fired.json``).
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rgt.errors import UsageError


def triage(
    target: str,
    exit_code: int | None = None,
    signal: int | None = None,
    full: bool = False,
    explain: bool = False,
) -> dict[str, Any]:
    """The verdict's document; a job that did not fail says so (``failure``: false)."""
    use_learned_rules()
    job = resolve(target, exit_code, signal)
    if job.state in NOT_FAILED:
        return not_failed(job)
    return diagnosis(target, job, full, explain)


def diagnosis(target: str, job: TriageInput, full: bool, explain: bool) -> dict[str, Any]:
    """A failure's label, cause and remedy (``explain``: which rules fired, the runner-up)."""
    from rgt.triage.explain import explain as explain_verdict

    decided = verdict(target, job, full)
    record_fire(decided.rule_id)
    data = {**decided.to_dict(), "failure": True, "job_id": job.job_id, "state": job.state}
    if job.job_id is not None:
        data = with_findings(data, job.findings)
    # The catalog entry on this label: why it happens, fixes in order of cost ("explain" is
    # taken by --explain's document, hence the longer key).
    data["explain_entry"] = f"rgt explain {data['label']}"
    if explain:
        why = explain_verdict(job.log_tail, job.exit_code, job.signal, job.context)
        data["explain"] = why.to_dict()
    return data


@dataclass(frozen=True)
class TriageInput:
    """What one classification needs: the log tail, the exit status and system readings."""

    log_tail: str
    exit_code: int | None = None
    signal: int | None = None
    context: dict[str, Any] = field(default_factory=dict)
    job_id: str | None = None
    state: str | None = None  # the job's state, when a JOB was given
    findings: dict[str, Any] = field(default_factory=dict)  # the agent's, on a launched job


def resolve(target: str, exit_code: int | None, signal: int | None) -> TriageInput:
    from rgt.triage import read_tail

    if not os.path.isfile(target):
        return _from_job(target, exit_code, signal)
    try:
        tail = read_tail(target)
    except OSError as exc:
        raise UsageError(
            f"cannot read log file {target!r}: {exc.strerror}", fix="check the file's permissions"
        ) from exc
    return TriageInput(tail, exit_code=exit_code, signal=signal)


def _from_job(target: str, exit_code: int | None, signal: int | None) -> TriageInput:
    from rgt.errors import UnknownJobError
    from rgt.jobs.diagnose import job_evidence
    from rgt.state.store import Store

    store = Store.open()
    try:
        evidence = job_evidence(store, store.resolve_job(target))
    except UnknownJobError:
        raise UsageError(
            f"{target!r} is neither a log file nor a job id",
            fix="pass a log file path, or a job id from `rgt status`",
        ) from None
    return TriageInput(
        evidence.log_tail,
        exit_code=evidence.exit_code if exit_code is None else exit_code,
        signal=evidence.signal if signal is None else signal,
        job_id=evidence.job_id,
        state=evidence.state,
        findings=_agent_findings(store, evidence.job_id, evidence.attempt),
    )


def _agent_findings(store: Any, job_id: str, attempt: int) -> dict[str, Any]:
    """The agent's record of the attempt's ranks and hangs (events.jsonl on the machine)."""
    from rgt.backends import backend_for
    from rgt.triage.launchers import agent_findings

    backend = backend_for(store, store.job(job_id).machine)
    return agent_findings(backend.events(job_id), attempt)


def with_findings(data: dict[str, Any], findings: dict[str, Any]) -> dict[str, Any]:
    """A launched job's verdict is the agent's: it read the first failing rank's own log and
    the kernel's OOM counters, which the merged log tail does not hold. The log's own verdict
    stays under ``log_label``. A hang dump of the attempt comes along as ``hang``."""
    data = dict(data, first_failing_rank=findings.get("first_failing_rank"))
    data["hang"] = findings.get("hang")
    data["rank_logs"] = findings.get("rank_logs")
    decision = findings.get("decision")
    if decision and decision.get("label"):
        data["log_label"] = data["label"]
        data.update({key: value for key, value in decision.items() if value is not None})
        data["rule_id"] = "agent.first_failing_rank"
        data["secondary"] = [label for label in data["secondary"] if label != data["label"]]
    if data["hang"] and data["hang"].get("next"):
        data["evidence"] = [*data["evidence"], "hang: " + str(data["hang"]["next"])]
    return data


# States that are not failures: there is nothing to classify, and nothing to retry.
NOT_FAILED = {
    "succeeded": "the job succeeded: there is nothing to triage",
    "cancelled": "the job was cancelled on request: it did not fail, and rgt does not rerun it",
    "running": "the job is still running: triage it once it has failed",
    "retrying": "the job is being restarted by its agent: triage it if it ends failed",
    "queued": "the job has not started yet: there is nothing to triage",
}


def not_failed(job: TriageInput) -> dict[str, Any]:
    state = str(job.state)
    hang = job.findings.get("hang")  # a running job that hangs: the stuck rank, named
    return {
        "hang": hang,
        "job_id": job.job_id,
        "state": state,
        "failure": False,
        "label": "cancelled" if state == "cancelled" else None,
        "cause": NOT_FAILED[state],
        "remedy": "none needed" if state in ("succeeded", "cancelled") else "wait",
        "secondary": [],  # no "retryable": a job that did not fail has nothing to retry
        "evidence": [],
        "rule_id": None,
    }


def verdict(target: str, job: TriageInput, full: bool) -> Any:
    from rgt.triage import classify, scan_file

    if not full:
        return classify(job.log_tail, job.exit_code, job.signal, job.context)
    if job.job_id is not None:
        raise UsageError(
            "--full reads a log file, not a job",
            fix=f"rgt logs {job.job_id} > job.log, then rgt triage job.log --full",
        )
    return scan_file(target, job.exit_code, job.signal, job.context)


def rules_dir() -> Path:
    from rgt.config import rgt_home

    return rgt_home() / "rules"


def use_learned_rules() -> None:
    """Make this process's rule base include the user's learned rules."""
    from rgt.triage.learned import ENV_DIR

    os.environ.setdefault(ENV_DIR, str(rules_dir()))


def _fired_path() -> Path:
    from rgt.config import rgt_home

    return rgt_home() / "triage-fired.json"


def fire_counts() -> dict[str, int]:
    try:
        data = json.loads(_fired_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(k): int(v) for k, v in data.items() if isinstance(v, int)}


def record_fire(rule_id: str) -> None:
    """Count one verdict of ``rule_id`` (best effort: a read-only home never fails triage)."""
    from rgt import _fs

    counts = fire_counts()
    counts[rule_id] = counts.get(rule_id, 0) + 1
    with contextlib.suppress(OSError):
        _fs.atomic_write_json(str(_fired_path()), counts)
