"""Jobs: `rgt run`, `rgt status`, `rgt logs`, `rgt cancel`, `rgt pull` (`rgt watch`: watch.py)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import click

from rgt.cli._forecast import dry_run_option
from rgt.cli._forecast import show as show_forecast
from rgt.cli._jobref import job_id as job_id_arg
from rgt.cli._output import Output, escape, output_options
from rgt.cli._runargs import (
    RunCommand,
    check_separator,
    resource_options,
)
from rgt.cli._text import printable
from rgt.state.store import Store

if TYPE_CHECKING:
    from rgt.jobs.launch import ProbeResult
    from rgt.resources import Resources
    from rgt.verbs.run import RunResult

PROBE_LINES = 25  # lines of a failed job's log tail shown by `rgt run`


@click.command(cls=RunCommand, context_settings={"ignore_unknown_options": True})
@click.argument("machine")
@click.argument("command", nargs=-1, type=click.UNPROCESSED, required=True)
@click.option(
    "--env",
    "env_pairs",
    multiple=True,
    metavar="NAME=VALUE",
    help="Plain environment for the job (never secrets).",
)
@click.option(
    "--secret",
    "secrets",
    multiple=True,
    metavar="NAME",
    help="Name of an env var whose value is sent over stdin, never stored.",
)
@click.option(
    "--artifact",
    "artifacts",
    multiple=True,
    metavar="GLOB",
    help="Artifact globs, relative to the job's working dir (never capped).",
)
@click.option(
    "--exclude",
    "excludes",
    multiple=True,
    metavar="GLOB",
    help="Globs left out of the default artifacts (what the job wrote in its working dir).",
)
@click.option(
    "--retries",
    type=int,
    default=3,
    show_default=True,
    help="Retry budget for retryable failures (preemption, host restart).",
)
@click.option(
    "--probe-seconds",
    type=float,
    default=60,
    show_default=True,
    help="Watch the job this long before handing back control.",
)
@click.option(
    "--notify",
    "notify_source",
    metavar="SOURCE",
    help="Webhook for job events (ntfy/Slack style), a secret: env:NAME, credentials:NAME "
    "($RGT_HOME/credentials.toml [notify]) or - (stdin). Never the URL itself.",
)
@click.option(
    "--resume-with",
    metavar="ARGS|COMMAND",
    help="How a restart resumes: '-…' ARGS appended to COMMAND, else a whole command; "
    "{ckpt} = the checkpoint's path (README: a script not written for rgt).",
)
@click.option("--ckpt", "ckpt_glob", metavar="GLOB", help="Where the script's checkpoints appear.")
@click.option(
    "--seed",
    type=click.IntRange(0, 2**32 - 1),
    help="RGT_SEED for the job (else $RGT_SEED, else drawn); recorded with the job.",
)
@click.option(
    "--lint", "lint_first", is_flag=True, help="Refuse to launch if `rgt lint` finds a bug."
)
@click.option(
    "--force",
    is_flag=True,
    help="Start despite errors of the machine's last audit, or a python without torch.",
)
@click.option(
    "--master-addr",
    metavar="ADDR",
    help="A fleet (MACHINE = A,B,…): the address the other nodes reach node 0 by "
    "(RGT_MASTER_ADDR), when it is not the one rgt connects to.",
)
@resource_options()
@dry_run_option
@output_options
def run(
    machine: str,
    command: tuple[str, ...],
    env_pairs: tuple[str, ...],
    secrets: tuple[str, ...],
    artifacts: tuple[str, ...],
    excludes: tuple[str, ...],
    retries: int,
    probe_seconds: float,
    notify_source: str | None,
    resume_with: str | None,
    ckpt_glob: str | None,
    lint_first: bool,
    force: bool,
    resources: Resources | None,
    out: Output,
    seed: int | None = None,
    dry_run: bool = False,
    master_addr: str | None = None,
) -> None:
    """Launch COMMAND detached on MACHINE:  rgt run NAME -- python train.py

    MACHINE may be a fleet, A,B,…: one node per machine, the first the master, each node's
    agent given RGT_NNODES, RGT_NODE_RANK, RGT_MASTER_ADDR and RGT_MASTER_PORT."""
    from rgt.verbs.run import RunRequest, forecast
    from rgt.verbs.run import run as run_job
    from rgt.verbs.tell import Tell

    check_separator(click.get_current_context())
    request = RunRequest(
        machine=machine, command=command, env=env_pairs, secrets=secrets,
        artifacts=artifacts, excludes=excludes, retries=retries, probe_seconds=probe_seconds,
        notify_source=notify_source, resume_with=resume_with, ckpt_glob=ckpt_glob,
        lint_first=lint_first, force=force, resources=resources, seed=seed,
        master_addr=master_addr,
    )  # fmt: skip
    if dry_run:  # nothing starts, no meter: the forecast (rgt.autostop.forecast)
        return show_forecast(out, forecast(Store.open(), request))
    result = run_job(Store.open(), request, Tell(warn=out.warn, info=out.info))
    out.result(result.to_json(), lambda o: _run_human(o, result))
    if result.failed:
        sys.exit(1)


def _run_human(o: Output, result: RunResult) -> None:
    o.line(f"job [bold]{result.job_id}[/] on {result.machine}: {result.probe.state.value}")
    if result.probe.failed and result.probe.status.get("reason"):  # e.g. the GPUs' holders
        o.out.print(printable(str(result.probe.status["reason"])), markup=False)
    _probe_log(o, result.probe)
    if result.probe.traceback:
        o.line(
            "[red]a traceback appeared in the log[/]: `rgt logs "
            f"{result.job_id}` / `rgt triage {result.job_id}`"
        )


def _probe_log(o: Output, result: ProbeResult) -> None:
    """A failure shows the log's last lines (the traceback), a running job its first lines."""
    if result.failed and result.log_tail.strip():
        o.line("[dim]last lines of the log:[/]")
        lines = result.log_tail.splitlines()[-PROBE_LINES:]
        o.out.print(printable("\n".join(lines)), markup=False)
    elif result.log_head.strip():
        lines = result.log_head.splitlines()[:15]
        o.out.print(printable("\n".join(lines)), markup=False, style="dim")


@click.command()
@click.argument("target", required=False)
@click.option("--full", is_flag=True, help="With --json: every field, not the compact form.")
@output_options
def status(target: str | None, full: bool, out: Output) -> None:
    """Machines and jobs (TARGET: a machine name or a job id)."""
    from rgt.verbs.status import report, shown

    data = report(Store.open(), target)
    out.result(shown(data, full), lambda o: _status_human(o, data), dense=not full)


def _status_human(o: Output, data: dict[str, Any]) -> None:
    from rgt.autostop.view import text as autostop_text

    o.table(
        ["machine", "backend", "price/h", "registered", "released"],
        [
            (m["name"], m["backend"], m["price_per_hour"], m["registered"], m["released"])
            for m in data["machines"]
        ],
        title="machines",
    )
    o.table(
        ["job", "machine", "state", "attempt", "label", "reason"],
        [
            (
                j["job_id"],
                j["machine"],
                j["state"],
                j.get("attempt"),
                j.get("label"),
                j.get("reason") or j.get("error"),
            )
            for j in data["jobs"]
        ],
        title="jobs",
        whole=("job",),
    )
    for j in data["jobs"]:  # a fleet: one line per node
        for n in j.get("nodes") or []:
            said = f"{j['job_id']} node {n['node']} ({n['machine']}): {n['state']}"
            o.out.print(f"{said}, attempt {n['attempt']} {n.get('reason') or ''}", markup=False)
    for j in data["jobs"]:  # whole, unwrapped: what to do about a lost agent or a bad file
        if j.get("heartbeat_lost") or j.get("problem"):
            o.out.print(f"{j['job_id']}: {j.get('reason')}", markup=False)
    for line in data["billing"]["lines"]:  # cost, budget, kept volumes, clocks, orphans
        o.out.print(line, markup=False)
    for name, view in data["autostop"].items():  # policy, money, why it did not fire
        o.out.print(autostop_text(name, view), markup=False)


@click.command()
@click.argument("job_id", callback=job_id_arg)
@click.option("-f", "--follow", is_flag=True, help="Keep printing until the job ends.")
@click.option("--attempt", type=int, help="Which attempt's log (default: the latest).")
@click.option(
    "--node", type=int, metavar="R", help="A fleet or multi-pod job: node R's log (default: 0)."
)
def logs(job_id: str, follow: bool, attempt: int | None, node: int | None = None) -> None:
    """Print a job's log (the raw log is the output; there is no --json form of a log).

    With -f the exit status is the job's outcome: 0 succeeded, 1 failed or cancelled."""
    from rgt.backends import backend_for
    from rgt.cli._follow import follow_log
    from rgt.jobs.fleet import node_machine

    store = Store.open()
    record = store.job(job_id)
    backend = backend_for(store, record.machine)
    on_node = getattr(backend, "on_node", None)  # Kubernetes: pod R; Slurm: node R's log
    if on_node is None or node is None:
        backend = backend_for(store, node_machine(record, node))
    else:
        backend = on_node(job_id, node)
    sys.exit(follow_log(store, backend, job_id, attempt, follow))


@click.command()
@click.argument("job_id", callback=job_id_arg)
@output_options
def cancel(job_id: str, out: Output) -> None:
    """Stop a job (its process group; a fleet's on every node); it ends as `cancelled`."""
    from rgt.jobs.fleet import cancel as cancel_job

    store = Store.open()
    data = cancel_job(store, store.job(job_id))
    out.result(data, lambda o: o.line(f"cancel requested for {job_id}"))


@click.command()
@click.argument("job_id", callback=job_id_arg)
@click.option(
    "--to",
    "dest",
    help="Destination directory (default ./rgt-pulls/JOB_ID), or hf://ORG/REPO[@REV]: upload "
    "the verified artifacts to the Hugging Face Hub (resumable).",
)
@click.option(
    "--hf-token",
    metavar="SOURCE",
    help="hf:// only: the write token from - (stdin), credentials:NAME or env:NAME; never the "
    "token itself.",
)
@output_options
def pull(job_id: str, dest: str | None, out: Output, hf_token: str | None = None) -> None:
    """Copy a job's artifacts, check every sha256 and load-verify each one."""
    from rich.progress import Progress

    from rgt.verbs.pull import destination
    from rgt.verbs.pull import pull as pull_job

    if dest and dest.startswith("hf://"):
        return _to_hub(job_id, dest, hf_token, out)
    with Progress(console=out.err, disable=out.json_mode, transient=True) as bar:
        task = bar.add_task(f"pull {job_id}", total=None)
        pulled = pull_job(
            Store.open(),
            job_id,
            destination(job_id, dest),
            progress=lambda _p, done, total: bar.update(task, completed=done, total=total),
        )

    def human(o: Output) -> None:
        for line in pulled.result.summary():
            o.line(escape(line))

    out.result(pulled.to_json(), human)
    if not pulled.result.ok:
        sys.exit(1)


def _to_hub(job_id: str, to: str, token_source: str | None, out: Output) -> None:
    from rgt.fetch.publish import publish

    data = publish(Store.open(), job_id, to, token_source)
    sent, kept = len(data["lfs_sent"]), len(data["lfs_skipped"])
    out.result(data, lambda o: o.line(
        f"{job_id} → {escape(to)}: {data['files']} verified file(s), {sent} large file(s) sent, "
        f"{kept} already on the Hub; commit {escape(str(data['commit']))}"))  # fmt: skip


@click.command()
@click.argument("job_id", callback=job_id_arg)
@output_options
def resume(job_id: str, out: Output) -> None:
    """Start a job's agent again after it was lost, or restart a failed job from its newest
    valid checkpoint (a new attempt; exit 1 with the reason when there is none)."""
    from rgt.jobs.launch import resume as do_resume

    data = do_resume(Store.open(), job_id)
    out.result(data, lambda o: o.out.print(f"{job_id}: {data['reason']}", markup=False))
    if not data.get("ok", True):
        sys.exit(1)


def register(cli: click.Group) -> None:
    for command in (run, status, logs, cancel, pull, resume):
        cli.add_command(command)
