"""`rgt smoke` and `rgt demo`."""

from __future__ import annotations

import sys
from typing import Any

import click

from rgt.cli._output import Output, escape, output_options


@click.command(context_settings={"ignore_unknown_options": True})
@click.argument("command", nargs=-1, type=click.UNPROCESSED, required=True)
@click.option(
    "--timeout",
    type=float,
    default=600,
    show_default=True,
    help="Seconds any one smoke run may take before smoke fails.",
)
@click.option("--resume-with", metavar="ARGS|COMMAND", help="As `rgt run --resume-with`.")
@click.option("--ckpt", "ckpt_glob", metavar="GLOB", help="As `rgt run --ckpt`.")
@click.option(
    "--kill-after-seconds",
    type=float,
    default=120,
    show_default=True,
    help="Stop a script that ignores RGT_SMOKE after this long with no checkpoint.",
)
@click.option(
    "--kill-after-lines",
    type=int,
    default=2000,
    show_default=True,
    help="... or after this many lines of output.",
)
@click.option("--no-lint", is_flag=True, help="Skip `rgt lint` of the command's scripts.")
@click.option("--overfit", is_flag=True, help="Instead: can it overfit one batch (rgt.smoke hook)?")
@output_options
def smoke(
    command: tuple[str, ...],
    timeout: float,
    resume_with: str | None,
    ckpt_glob: str | None,
    kill_after_seconds: float,
    kill_after_lines: int,
    no_lint: bool,
    overfit: bool,
    out: Output,
) -> None:
    """Run COMMAND on the CPU in a copy of this tree, kill it at its first checkpoint, resume it.

    Example:  rgt smoke --ckpt 'out/ckpt.pt' --resume-with '--init_from=resume' -- python train.py
    """
    from rgt.verbs.smoke import options, smoke
    from rgt.verbs.tell import Tell

    how = options(resume_with, ckpt_glob, kill_after_seconds, kill_after_lines)
    if overfit:
        return _overfit(command, timeout, out)
    done = smoke(command, how, timeout, not no_lint, Tell(warn=out.warn, info=out.info))
    out.result(done.to_json(), lambda o: _smoke_human(o, done.result))
    if done.lint_bugs:
        out.warn(f"rgt lint: {done.lint_bugs} bug(s) in the scripts: smoke counts as failed")
    if done.failed:
        sys.exit(1)


def _overfit(command: tuple[str, ...], timeout: float, out: Output) -> None:
    from rgt.smoke import run_overfit

    data = run_overfit(list(command), timeout)
    said = data["problems"] + [e["next"] for e in data.get("events", [])]  # input_bound
    out.result(data, lambda o: o.line(escape("\n".join(said) or "overfit: ok")))
    sys.exit(0 if data["ok"] else 1)


def _smoke_human(o: Output, result: Any) -> None:
    verdict = result.resume
    if result.exact_resume is not None:
        word = "[green]exact[/]" if result.exact_resume else "[red]NOT exact[/]"
    elif verdict.checked and verdict.continued is not None:
        word = "[green]continued[/]" if verdict.continued else "[red]started over[/]"
    else:
        word = "not checked"
    o.line(f"smoke {'[green]passed[/]' if result.ok else '[red]FAILED[/]'}; resume: {word}")
    o.line(f"  {escape(result.reason)}")
    if verdict.how_to_enable:
        o.line(f"  to check resume: {escape(verdict.how_to_enable)}")
    waits = result.input_wait
    if waits:
        bound = " [yellow]input-bound[/]" if waits["input_bound"] else ""
        share = f"{waits['wait_pct']}% of step time over {waits['samples']} batch(es)"
        o.line(f"  data wait: {share}{bound}")
        if waits.get("remedy"):
            o.line(f"  fix: {escape(waits['remedy'])}")
    last = result.resumed or result.uninterrupted
    if not result.ok and last is not None:
        o.line("[dim]" + escape("\n".join(last.log_tail.splitlines()[-15:])) + "[/]")


@click.command()
@click.option(
    "--steps", type=int, default=120, show_default=True, help="Training steps of the demo job."
)
@output_options
def demo(steps: int, out: Output) -> None:
    """The whole lifecycle on this machine: smoke, run, kill -9, resume, pull, gate."""
    from rgt.demo import run_demo

    report = run_demo(out.info, steps=steps)
    out.result(report.to_json(), lambda o: _demo_human(o, report))
    if not report.exact_resume or report.job.get("state") != "succeeded":
        sys.exit(1)


def _demo_human(o: Output, report: Any) -> None:
    o.table(["phase", "seconds"], list(report.phases.items()), title="time per phase")
    o.table(["", ""], _summary_rows(report), title="rgt demo summary")
    o.line(f"workspace: {report.workspace}")
    if not report.exact_resume:
        ref = report.reference
        why = ref.get("error") or (
            f"the uninterrupted run exited {ref.get('returncode')} at step {ref.get('step')}"
            if ref.get("returncode")
            else "the resumed weights differ from the uninterrupted run's"
        )
        o.line(f"[red]not an exact resume:[/] {escape(str(why))}")
    if report.gate_after_pull.get("only_approval_missing"):
        o.line(
            f"to release the machine a human runs: rgt approve {report.machine} && "
            f"rgt down {report.machine}"
        )


def _summary_rows(report: Any) -> list[tuple[str, Any]]:
    pulled = f"{report.pull.get('files')} files, "
    pulled += "100 % OK" if report.pull.get("ok") else "FAILED"
    job = report.job
    return [
        ("job", f"{report.job_id}: {job.get('state')} in {job.get('attempt')} attempt(s)"),
        ("kill -9 at step", report.kill.get("step_at_kill")),
        ("steps lost to the kill", report.steps_lost),
        ("pulled + verified", pulled),
        ("gate before pull", _refused(report.gate_before_pull)),
        ("gate after pull", _refused(report.gate_after_pull)),
        ("exact_resume", report.exact_resume),
        ("lr 1e-3 vs 3e-3 (3 seeds)", report.compare.get("verdict")),
        ("report (numbers from runs/)", report.delivery.get("report")),
    ]


def _refused(gate: dict[str, Any]) -> str:
    checks: list[dict[str, Any]] = gate.get("checks") or []
    failing = [c["name"] for c in checks if not c.get("ok")]
    return "passes" if not failing else "refused: not " + ", not ".join(failing)


def register(cli: click.Group) -> None:
    cli.add_command(smoke)
    cli.add_command(demo)
