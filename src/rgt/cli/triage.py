"""Triage: `rgt triage LOGFILE` classifies a failed job's log into one label with cause and remedy.

The argument is a log file, or a JOB id: then the last attempt's log tail and exit status are
read from the job's machine (the same evidence the agent classified when the job ended).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import click

from rgt.cli._output import Output, escape, output_options
from rgt.cli._text import printable
from rgt.errors import UsageError


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


def _resolve_target(target: str, exit_code: int | None, signal: int | None) -> TriageInput:
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


def _with_findings(data: dict[str, Any], findings: dict[str, Any]) -> dict[str, Any]:
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


def _not_failed(job: TriageInput) -> dict[str, Any]:
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


def _not_failed_human(data: dict[str, Any]) -> Any:
    def render(o: Output) -> None:
        o.out.print(f"{data['job_id']}: {data['state']}", markup=False)
        o.out.print(data["cause"], markup=False)
        if data["hang"]:
            o.out.print(f"hang:      {printable(str(data['hang'].get('next')))}", markup=False)

    return render


def _human(data: dict[str, Any]) -> Any:
    def render(o: Output) -> None:
        from rgt.triage.labels import RETRY_ELSEWHERE

        retry = "no"
        if data["retryable"]:
            where = "another machine" if data["label"] in RETRY_ELSEWHERE else "this machine"
            retry = f"yes (with the same config, on {where})"
        o.line(f"label:     [bold]{data['label']}[/]  (rule {data['rule_id']})")
        o.line(f"cause:     {escape(data['cause'])}")
        o.line(f"remedy:    {escape(data['remedy'])}")
        o.line(f"retry:     {retry}")
        o.line(f"read:      {escape(data['explain_entry'])}  (why, and fixes in order of cost)")
        if data["secondary"]:
            o.line(f"secondary: {', '.join(data['secondary'])}")
        first = data.get("first_failing_rank")
        if first:
            o.line(f"rank:      {escape(_rank_words(first))}")
            o.line(f"rank logs: {escape(str(data.get('rank_logs') or 'none kept'))}")
        o.line("evidence:")
        for line in data["evidence"] or ["(none)"]:
            # A log is the job's output: its escape sequences must not drive this terminal.
            o.out.print(f"  {printable(line)}", markup=False)
        if "explain" in data:
            _explain_lines(o, data["explain"])

    return render


def _rank_words(rank: dict[str, Any]) -> str:
    """``first failing rank 1 (pid 4242): SIGKILL`` from a ``ranks.json`` entry."""
    how = rank.get("signal") or f"exit code {rank.get('exit_code')}"
    return f"first failing rank {rank.get('rank')} (pid {rank.get('pid')}): {how}"


def _explain_lines(o: Output, why: dict[str, Any]) -> None:
    runner = why["runner_up"] or "none (no rule of another label fired)"
    if why["runner_up_rule"]:
        runner += f" (rule {why['runner_up_rule']})"
    o.line(f"decided by: rule {why['decided_by']}")
    o.line(f"runner-up: {escape(runner)}")
    o.line("rules that fired:")
    for firing in why["fired"] or [{"rule_id": "(none)", "label": "", "silenced_by": []}]:
        silenced = firing["silenced_by"]
        note = f"  silenced by {', '.join(silenced)}" if silenced else ""
        o.line(f"  {firing['rule_id']} -> {firing['label']}{note}")


@click.command()
@click.argument("target", metavar="LOGFILE|JOB", required=False)
@click.option("--exit-code", type=int, help="The job's exit status (137 = killed by SIGKILL).")
@click.option("--signal", "signal_", type=int, help="The signal that ended the job, if any.")
@click.option(
    "--explain",
    is_flag=True,
    help="Show the rule that decided, every rule that fired, the runner-up.",
)
@click.option("--learn", "learn_label", metavar="LABEL", help="Learn a rule: this log is LABEL.")
@click.option("--remedy", help="With --learn: the remedy the learned rule states.")
@click.option("--yes", is_flag=True, help="With --learn: store the proposed rule without asking.")
@click.option("--rules", "list_rules", is_flag=True, help="List bundled and learned rules.")
@click.option(
    "--full",
    is_flag=True,
    help="LOGFILE: read the whole file (every matching line, then the tail), not the last 256 KiB.",
)
@output_options
def triage(
    target: str | None,
    exit_code: int | None,
    signal_: int | None,
    explain: bool,
    learn_label: str | None,
    remedy: str | None,
    yes: bool,
    list_rules: bool,
    full: bool,
    out: Output,
) -> None:
    """Classify a failed job (its LOGFILE or JOB id): label, cause, remedy, retry, evidence."""
    from rgt.cli import _triage_learn
    from rgt.triage.explain import explain as explain_verdict

    _triage_learn.use_learned_rules()
    if list_rules:
        _triage_learn.list_rules(out)
        return
    if target is None:
        raise UsageError("a LOGFILE or JOB is needed", fix="rgt triage LOGFILE|JOB, or --rules")

    job = _resolve_target(target, exit_code, signal_)
    if job.state in NOT_FAILED:
        data = _not_failed(job)
        out.result(data, _not_failed_human(data))
        return
    if learn_label:
        _triage_learn.learn(job.log_tail, job, learn_label, remedy, yes, out)
        return
    verdict = _verdict(target, job, full)
    _triage_learn.record_fire(verdict.rule_id)
    data = {**verdict.to_dict(), "failure": True, "job_id": job.job_id, "state": job.state}
    if job.job_id is not None:
        data = _with_findings(data, job.findings)
    # The catalog entry on this label: why it happens, fixes in order of cost ("explain" is
    # taken by --explain's document, hence the longer key).
    data["explain_entry"] = f"rgt explain {data['label']}"
    if explain:
        why = explain_verdict(job.log_tail, job.exit_code, job.signal, job.context)
        data["explain"] = why.to_dict()
    out.result(data, _human(data))


def _verdict(target: str, job: TriageInput, full: bool) -> Any:
    from rgt.triage import classify, scan_file

    if not full:
        return classify(job.log_tail, job.exit_code, job.signal, job.context)
    if job.job_id is not None:
        raise UsageError(
            "--full reads a log file, not a job",
            fix=f"rgt logs {job.job_id} > job.log, then rgt triage job.log --full",
        )
    return scan_file(target, job.exit_code, job.signal, job.context)


def register(cli: click.Group) -> None:
    cli.add_command(triage)
