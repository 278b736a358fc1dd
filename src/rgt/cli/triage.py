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
from rgt.errors import UsageError


@dataclass(frozen=True)
class TriageInput:
    """What one classification needs: the log tail, the exit status and system readings."""

    log_tail: str
    exit_code: int | None = None
    signal: int | None = None
    context: dict[str, Any] = field(default_factory=dict)


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
    from rgt.jobs.store import Store

    try:
        evidence = job_evidence(Store.open(), target)
    except UnknownJobError:
        raise UsageError(
            f"{target!r} is neither a log file nor a job id",
            fix="pass a log file path, or a job id from `rgt status`",
        ) from None
    return TriageInput(
        evidence.log_tail,
        exit_code=evidence.exit_code if exit_code is None else exit_code,
        signal=evidence.signal if signal is None else signal,
    )


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
            o.out.print(f"  {line}", markup=False)

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
    verdict = classify(job.log_tail, job.exit_code, job.signal, job.context)
    data = verdict.to_dict()
    out.result(data, _human(data))


def register(cli: click.Group) -> None:
    cli.add_command(triage)
