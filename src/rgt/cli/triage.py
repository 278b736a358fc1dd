"""Triage: `rgt triage LOGFILE` classifies a failed job's log into one label with cause and remedy.

The argument is a log file, or a JOB id: then the last attempt's log tail and exit status are
read from the job's machine (the same evidence the agent classified when the job ended).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import click
from rich.markup import escape

from rgt.cli._output import Output, output_options
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
    )


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
    return {
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

    return render


def _human(data: dict[str, Any]) -> Any:
    def render(o: Output) -> None:
        retry = "yes" if data["retryable"] else "no"
        o.line(f"label:     [bold]{data['label']}[/]  (rule {data['rule_id']})")
        o.line(f"cause:     {escape(data['cause'])}")
        o.line(f"remedy:    {escape(data['remedy'])}")
        o.line(f"retry:     {retry} (with the same config)")
        if data["secondary"]:
            o.line(f"secondary: {', '.join(data['secondary'])}")
        o.line("evidence:")
        for line in data["evidence"] or ["(none)"]:
            # A log is the job's output: its escape sequences must not drive this terminal.
            o.out.print(f"  {printable(line)}", markup=False)

    return render


@click.command()
@click.argument("target", metavar="LOGFILE|JOB")
@click.option("--exit-code", type=int, help="The job's exit status (137 = killed by SIGKILL).")
@click.option("--signal", "signal_", type=int, help="The signal that ended the job, if any.")
@output_options
def triage(target: str, exit_code: int | None, signal_: int | None, out: Output) -> None:
    """Classify a failed job (its LOGFILE or JOB id): label, cause, remedy, retry, evidence."""
    from rgt.triage import classify

    job = _resolve_target(target, exit_code, signal_)
    if job.state in NOT_FAILED:
        data = _not_failed(job)
        out.result(data, _not_failed_human(data))
        return
    verdict = classify(job.log_tail, job.exit_code, job.signal, job.context)
    data = {**verdict.to_dict(), "failure": True, "job_id": job.job_id, "state": job.state}
    out.result(data, _human(data))


def register(cli: click.Group) -> None:
    cli.add_command(triage)
