"""`rgt smoke` and `rgt demo`."""

from __future__ import annotations

import sys
from typing import Any

import click
from rich.markup import escape

from rgt.cli._output import Output, output_options


@click.command(context_settings={"ignore_unknown_options": True})
@click.argument("command", nargs=-1, type=click.UNPROCESSED, required=True)
@click.option(
    "--timeout",
    type=float,
    default=600,
    show_default=True,
    help="Seconds each of the three smoke runs may take.",
)
@output_options
def smoke(command: tuple[str, ...], timeout: float, out: Output) -> None:
    """Run COMMAND on the CPU for 2 batches, kill it, resume it, compare the states.

    Example:  rgt smoke -- python train.py
    """
    from rgt.jobs.smoke import smoke as do_smoke

    out.info("smoke: uninterrupted run, then a run killed after its first checkpoint, resumed")
    result = do_smoke(command, timeout=timeout)

    def human(o: Output) -> None:
        verdict = {True: "[green]exact[/]", False: "[red]NOT exact[/]", None: "not checked"}
        o.line(
            f"smoke {'[green]passed[/]' if result.ok else '[red]FAILED[/]'}; resume: "
            f"{verdict[result.exact_resume]}"
        )
        o.line(f"  {escape(result.reason)}")
        if not result.ok:
            last = result.resumed or result.uninterrupted
            o.line("[dim]" + escape("\n".join(last.log_tail.splitlines()[-15:])) + "[/]")

    out.result(result.to_json(), human)
    if not result.ok:
        sys.exit(1)


@click.command()
@click.option(
    "--steps", type=int, default=120, show_default=True, help="Training steps of the demo job."
)
@output_options
def demo(steps: int, out: Output) -> None:
    """The whole lifecycle on this machine: smoke, run, kill -9, resume, pull, gate."""
    from rgt.demo import run_demo

    report = run_demo(out.info, steps=steps)
    data = report.to_json()

    def human(o: Output) -> None:
        o.table(
            ["phase", "seconds"],
            sorted(report.phases.items(), key=lambda kv: 0),
            title="time per phase",
        )
        o.table(
            ["", ""],
            [
                (
                    "job",
                    f"{report.job_id}: {report.job.get('state')} in "
                    f"{report.job.get('attempt')} attempt(s)",
                ),
                ("kill -9 at step", report.kill.get("step_at_kill")),
                ("steps lost to the kill", report.steps_lost),
                (
                    "pulled + verified",
                    f"{report.pull.get('files')} files, "
                    f"{'100 % OK' if report.pull.get('ok') else 'FAILED'}",
                ),
                ("gate before pull", _refused(report.gate_before_pull)),
                ("gate after pull", _refused(report.gate_after_pull)),
                ("exact_resume", report.exact_resume),
                ("lr 1e-3 vs 3e-3 (3 seeds)", report.compare.get("verdict")),
                ("report (numbers from runs/)", report.delivery.get("report")),
            ],
            title="rgt demo summary",
        )
        o.line(f"workspace: {report.workspace}")
        if report.gate_after_pull.get("only_approval_missing"):
            o.line(
                f"to release the machine a human runs: rgt approve {report.machine} && "
                f"rgt down {report.machine}"
            )

    out.result(data, human)
    if not report.exact_resume or report.job.get("state") != "succeeded":
        sys.exit(1)


def _refused(gate: dict[str, Any]) -> str:
    checks: list[dict[str, Any]] = gate.get("checks") or []
    failing = [c["name"] for c in checks if not c.get("ok")]
    return "passes" if not failing else "refused: not " + ", not ".join(failing)


def register(cli: click.Group) -> None:
    cli.add_command(smoke)
    cli.add_command(demo)
