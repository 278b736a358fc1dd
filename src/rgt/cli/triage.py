"""Triage: `rgt triage LOGFILE` classifies a failed job's log into one label with cause and remedy.

The argument is a log file, or a JOB id: then the last attempt's log tail and exit status are
read from the job's machine (the same evidence the agent classified when the job ended).
"""

from __future__ import annotations

from typing import Any

import click

from rgt.cli._output import Output, escape, output_options
from rgt.cli._text import printable
from rgt.errors import UsageError


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
    from rgt.verbs import triage as verbs

    verbs.use_learned_rules()
    if list_rules:
        _triage_learn.list_rules(out)
        return
    if target is None:
        raise UsageError("a LOGFILE or JOB is needed", fix="rgt triage LOGFILE|JOB, or --rules")
    job = verbs.resolve(target, exit_code, signal_)
    if job.state in verbs.NOT_FAILED:
        data = verbs.not_failed(job)
        out.result(data, _not_failed_human(data))
    elif learn_label:
        _triage_learn.learn(job.log_tail, job, learn_label, remedy, yes, out)
    else:
        data = verbs.diagnosis(target, job, full, explain)
        out.result(data, _human(data))


def register(cli: click.Group) -> None:
    cli.add_command(triage)
