"""Triage: `rgt triage LOGFILE` classifies a failed job's log into one label with cause and remedy.

The argument is a log path today; a JOB id (read the job's log, exit status and the machine's
readings from the state DB) plugs in at ``_resolve_target`` without changing the command.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import click

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
        raise UsageError(
            f"no such log file: {target!r}",
            fix="pass the path of a job's log file (e.g. logs/attempt-1.log)",
        )
    try:
        tail = read_tail(target)
    except OSError as exc:
        raise UsageError(
            f"cannot read log file {target!r}: {exc.strerror}", fix="check the file's permissions"
        ) from exc
    return TriageInput(tail, exit_code=exit_code, signal=signal)


def _human(data: dict[str, Any]) -> Any:
    def render(o: Output) -> None:
        retry = "yes" if data["retryable"] else "no"
        o.line(f"label:     [bold]{data['label']}[/]  (rule {data['rule_id']})")
        o.line(f"cause:     {data['cause']}")
        o.line(f"remedy:    {data['remedy']}")
        o.line(f"retry:     {retry} (with the same config)")
        if data["secondary"]:
            o.line(f"secondary: {', '.join(data['secondary'])}")
        o.line("evidence:")
        for line in data["evidence"] or ["(none)"]:
            o.out.print(f"  {line}", markup=False)

    return render


@click.command()
@click.argument("target", metavar="LOGFILE")
@click.option("--exit-code", type=int, help="The job's exit status (137 = killed by SIGKILL).")
@click.option("--signal", "signal_", type=int, help="The signal that ended the job, if any.")
@output_options
def triage(target: str, exit_code: int | None, signal_: int | None, out: Output) -> None:
    """Classify a failed job's LOGFILE: label, cause, remedy, retry yes/no, evidence."""
    from rgt.triage import classify

    job = _resolve_target(target, exit_code, signal_)
    verdict = classify(job.log_tail, job.exit_code, job.signal, job.context)
    data = verdict.to_dict()
    out.result(data, _human(data))


def register(cli: click.Group) -> None:
    cli.add_command(triage)
