"""Monitoring: `rgt watch [NAME|JOB]`, `rgt audit NAME`, `rgt reap NAME`."""

from __future__ import annotations

import sys
import time
from typing import Any

import click

from rgt.agent.jobfiles import TERMINAL
from rgt.cli._output import Output, escape, output_options
from rgt.state.store import Store
from rgt.verbs.target import machine_or_job


@click.command()
@click.argument("target", required=False, metavar="[NAME|JOB]")
@click.option("--once", is_flag=True, help="Print one patrol report and exit 0.")
@click.option("--interval", type=float, default=5.0, show_default=True)
@click.option("--events", type=int, default=8, show_default=True, help="Events per job.")
@click.option("--no-gpu", is_flag=True, help="Skip nvidia-smi on the machines.")
@click.option("--full", is_flag=True, help="With --json: every field, not the compact form.")
@click.option(
    "--every",
    metavar="DURATION",
    help="Patrol: one compact report per DURATION (10m, 30s, 1h), for an agent's periodic check.",
)
@click.option(
    "--until-ended",
    is_flag=True,
    help="Patrol until every job has ended: exit 0 if all succeeded, 1 if any did not.",
)
@output_options
def watch(
    target: str | None,
    once: bool,
    interval: float,
    events: int,
    no_gpu: bool,
    full: bool,
    every: str | None,
    until_ended: bool,
    out: Output,
) -> None:
    """Machines and jobs, live. With a JOB: follow it until it ends (exit 0 if it succeeded).

    Example:  rgt watch --every 10m --until-ended --json   (one bounded report per round)
    """
    from rgt.verbs.watch import job_of, patrol_options

    store, options = Store.open(), patrol_options(events, gpu=not no_gpu)
    target = machine_or_job(store, target)
    if every is not None or until_ended:
        _patrol_rounds(store, target, _every(every, interval, once), until_ended, options, out)
    elif once:
        _once(store, target, options, out, full)
    elif (job_id := job_of(store, target)) is not None:
        _follow(store, job_id, interval, options, out, full)
    else:
        _live(store, target, interval, options, out, full)


def _once(store: Store, target: str | None, options: Any, out: Output, full: bool) -> None:
    from rgt.verbs.watch import once

    seen = once(store, target, options)

    def human(o: Output) -> None:
        if seen.job:
            _job_human(o, seen.report)
        else:
            o.out.print(_view(seen.report))

    out.result(seen.document(full), human, dense=not full)


def _view(report: dict[str, Any]) -> Any:
    from rich.console import Group
    from rich.text import Text

    from rgt.watch.render import report_view

    money = [Text(line) for line in report.get("billing", {}).get("lines", [])]
    clocks = [Text(f"session {s['machine']}: {s['line']}") for s in report.get("sessions", [])]
    return Group(report_view(report), *money, *clocks)


def _follow(
    store: Store, job_id: str, interval: float, options: Any, out: Output, full: bool
) -> None:
    """Follow one job until it ends, or until following would wait for ever (its agent is
    gone, its directory vanished, its status file is unreadable with no agent to fix it)."""
    from rgt.backends.jobstatus import stuck
    from rgt.verbs.watch import job_report
    from rgt.watch.compact import followed
    from rgt.watch.render import job_line

    while True:
        job = job_report(store, job_id, options)
        if job["state"] in TERMINAL or stuck(job):
            break
        out.info(escape(job_line(job)))  # data, never markup: "[heartbeat_lost]" must show
        time.sleep(interval)
    out.result(job if full else followed(job), lambda o: _job_human(o, job), dense=not full)
    if job["state"] != "succeeded":
        sys.exit(1)


def _job_human(o: Output, job: dict[str, Any]) -> None:
    from rgt.watch.render import job_line

    o.out.print(job_line(job), markup=False)
    lost, problem = job.get("heartbeat_lost"), job.get("problem")
    if lost:
        o.out.print(f"heartbeat_lost: {lost['why']}. {lost['next']}", markup=False)
    if problem:
        o.out.print(f"{problem['path']}: {problem['detail']}. {problem['fix']}", markup=False)


def _live(
    store: Store, target: str | None, interval: float, options: Any, out: Output, full: bool
) -> None:
    """Redraw until Ctrl-C; with --json, one report per line (JSON Lines) instead."""
    import json

    from rich.live import Live

    from rgt.verbs.watch import machines_report
    from rgt.watch.compact import watch_report

    try:
        if out.json_mode:
            while True:
                report = machines_report(store, target, options)
                shown = report if full else watch_report(report)
                sys.stdout.write(json.dumps(shown, default=str) + "\n")
                sys.stdout.flush()
                time.sleep(interval)
        with Live(console=out.out, auto_refresh=False) as live:
            while True:
                live.update(_view(machines_report(store, target, options)), refresh=True)
                time.sleep(interval)
    except KeyboardInterrupt:
        out.info("stopped watching (the jobs go on)")


def _every(every: str | None, interval: float, once: bool) -> float:
    from rgt.errors import UsageError
    from rgt.watch.rounds import parse_every

    if once:
        raise UsageError(
            "--once prints one report; --every/--until-ended patrol in rounds",
            fix="drop --once, or drop --every/--until-ended",
        )
    return interval if every is None else parse_every(every)


def _patrol_rounds(
    store: Store, target: str | None, seconds: float, until_ended: bool, options: Any, out: Output
) -> None:
    """One bounded report per round (``rgt.watch.rounds``); with ``until_ended``, stop once
    every job has ended, exit 0 if all succeeded and 1 otherwise."""
    from rgt.watch.patrol import patrol
    from rgt.watch.rounds import round_report

    number = 0
    try:
        while True:
            number += 1
            doc = round_report(patrol(store, target, options), number)
            _print_round(out, doc)
            if until_ended and doc["all_ended"]:
                sys.exit(0 if doc["ok"] else 1)
            time.sleep(seconds)
    except KeyboardInterrupt:
        out.info("stopped patrolling (the jobs go on)")


def _print_round(out: Output, doc: dict[str, Any]) -> None:
    """JSON Lines with --json (one document per round), else a few plain lines."""
    import json

    from rgt.cli._text import printable
    from rgt.watch.rounds import round_lines

    if out.json_mode:
        sys.stdout.write(json.dumps(doc, separators=(",", ":"), default=str) + "\n")
    else:  # a machine's words are data: its escape sequences must not drive this terminal
        sys.stdout.write("".join(printable(line) + "\n" for line in round_lines(doc)))
    sys.stdout.flush()


@click.command()
@click.argument("name")
@click.option("--path", "tiers", multiple=True, help="A storage tier to measure (repeatable).")
@click.option("--ckpt-gb", type=float, default=0.0, help="Size of one checkpoint.")
@click.option("--keep", type=int, default=3, show_default=True, help="Checkpoints kept.")
@click.option("--scratch-gb", type=float, default=0.0, help="Everything else the run writes.")
@click.option("--worker-gb", type=float, default=2.0, show_default=True, help="RAM per worker.")
@click.option(
    "--python",
    metavar="PATH",
    help="The interpreter jobs should run (default: the profile's [environment] python).",
)
@output_options
def audit(
    name: str,
    tiers: tuple[str, ...],
    ckpt_gb: float,
    keep: int,
    scratch_gb: float,
    worker_gb: float,
    python: str | None,
    out: Output,
) -> None:
    """Phase 0 on NAME: disks and inodes, cgroup limits, GPUs, driver, torch; findings + fixes."""
    from rgt.watch.audit import Budget
    from rgt.watch.audit import audit as run_audit

    budget = Budget(ckpt_gb=ckpt_gb, keep=keep, scratch_gb=scratch_gb, worker_gb=worker_gb)
    data = run_audit(Store.open(), name, list(tiers), budget, python)
    out.result(data, _audit_human(data))
    if not data["ok"]:
        sys.exit(1)


def _audit_human(data: dict[str, Any]) -> Any:
    def render(o: Output) -> None:
        r = data["readings"]
        gpus = ", ".join(g["name"] or "?" for g in (r.get("gpu") or {}).get("gpus") or [])
        facts = escape(f"{r.get('host')}, GPUs: {gpus or 'none'}")
        o.line(f"[bold]{data['machine']}[/]: {facts}")
        o.table(
            ["tier", "mount", "free GiB", "bytes", "inodes"],
            [
                (
                    t["tier"],
                    t.get("mount"),
                    _gib(t.get("bytes_free")),
                    t.get("bytes_pct"),
                    t.get("inodes_pct"),
                )
                for t in r.get("tiers") or []
            ],
        )
        for kind, choice in sorted((data.get("routes") or {}).items()):
            o.line(escape(f"route {kind}: {choice['chosen'] or 'none'} ({choice['why']})"))
        o.line(
            f"suggested DataLoader workers: {data['workers']['suggested']} "
            f"({data['workers']['basis']})"
        )
        o.table(
            ["severity", "check", "finding", "fix"],
            [(f["severity"], f["check"], f["finding"], f["fix"]) for f in data["findings"]],
        )

    return render


def _gib(value: Any) -> str:
    return "-" if value is None else f"{value / (1 << 30):.1f}"


@click.command()
@click.argument("name")
@click.option("--kill", is_flag=True, help="Kill the listed processes (asks at a terminal).")
@output_options
def reap(name: str, kill: bool, out: Output) -> None:
    """List processes holding GPU memory on NAME that are not running jobs; --kill stops them."""
    from rgt.backends import backend_for
    from rgt.backends.remote import machine_call
    from rgt.errors import GateRefused

    backend = backend_for(Store.open(), name)
    data = machine_call(backend, "reap")
    pids = [s["pid"] for s in data["suspects"]]
    if kill and pids:
        if not sys.stdin.isatty():
            raise GateRefused(
                "--kill needs a human at a terminal",
                ["stdin is not a terminal"],
                fix=f"run `rgt reap {name} --kill` in a terminal",
            )
        _show_suspects(out, data)
        click.confirm(f"kill {len(pids)} process(es) {pids} on {name}?", abort=True, err=True)
        data = machine_call(backend, "reap", [a for p in pids for a in ("--kill", str(p))])
    out.result(data, lambda o: _show_suspects(o, data))


def _show_suspects(o: Output, data: dict[str, Any]) -> None:
    o.table(
        ["pid", "VRAM MiB", "age s", "why", "command"],
        [
            (s["pid"], s.get("used_mib"), s.get("age_s"), s["why"], s.get("cmdline"))
            for s in data["suspects"]
        ],
    )
    for k in data.get("killed") or []:
        o.line(f"killed {k['pid']} (signals {k['signals']})")


def register(cli: click.Group) -> None:
    for command in (watch, audit, reap):
        cli.add_command(command)
