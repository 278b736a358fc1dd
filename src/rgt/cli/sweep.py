"""Sweeps: `rgt sweep run|status|pull|groups SWEEP.toml` (library: rgt.sweep.sweep)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from rgt.cli._output import Output, escape, output_options
from rgt.state.store import Store

SWEEP_FILE = click.Path(path_type=Path, dir_okay=False)
UNFINISHED = ("running", "queued", "unreachable", "failed", "missing", "duplicate")


@click.group()
def sweep() -> None:
    """A grid or list of cells (overrides x seeds), one job each, reconciled afterwards."""


@sweep.command()
@click.argument("sweep_file", type=SWEEP_FILE)
@click.option("--retry-failed", is_flag=True, help="Relaunch cells that failed with a bug too.")
@click.option("--detach", is_flag=True, help="Launch what fits now and return.")
@click.option("--poll", "poll_s", type=float, default=2.0, show_default=True, help="Seconds.")
@click.option(
    "--unreachable-wait",
    type=float,
    default=600.0,
    show_default=True,
    help="Seconds to wait for a machine that stays down before returning.",
)
@output_options
def run(
    sweep_file: Path,
    retry_failed: bool,
    detach: bool,
    poll_s: float,
    unreachable_wait: float,
    out: Output,
) -> None:
    """Launch the cells that need it; skip done ones, leave running ones alone."""
    from rgt.sweep.sweep import RunOptions, load_sweep, report, run_sweep

    spec = load_sweep(sweep_file)
    options = RunOptions(retry_failed, detach, poll_s, unreachable_wait)
    out.info(f"sweep {spec.name}: {len(spec.cells)} cell(s) on {', '.join(spec.machines)}")
    seen, log = run_sweep(Store.open(), spec, options, on_tick=lambda s, _l: _tick(out, s))
    data = report(spec, seen, log)
    out.result(data, lambda o: _table(o, data))
    if not detach and any(data["counts"][s] for s in UNFINISHED):
        sys.exit(1)


def _tick(out: Output, seen: Any) -> None:
    counts = ", ".join(f"{n} {s}" for s, n in seen.counts().items() if n)
    down = f"; unreachable: {', '.join(seen.unreachable)}" if seen.unreachable else ""
    out.info(f"[dim]{counts}{down}[/]")


@sweep.command()
@click.argument("sweep_file", type=SWEEP_FILE)
@output_options
def status(sweep_file: Path, out: Output) -> None:
    """The reconciliation table: done, succeeded, running, failed, missing, duplicate."""
    from rgt.sweep.sweep import load_sweep
    from rgt.sweep.sweep import status as sweep_status

    data = sweep_status(Store.open(), load_sweep(sweep_file))
    out.result(data, lambda o: _table(o, data))


def _table(o: Output, data: dict[str, Any]) -> None:
    rows = []
    for cell in data["cells"]:
        job = cell["jobs"][-1]["job_id"] if cell["jobs"] else None
        rows.append(
            (
                cell["cell_id"],
                cell["group"],
                cell["seed"],
                cell["state"],
                cell["label"],
                cell["machine"],
                job,
            )
        )
    o.table(["cell", "group", "seed", "state", "label", "machine", "job"], rows, data["sweep"])
    o.line(", ".join(f"{n} {s}" for s, n in data["counts"].items() if n))
    for name, why in data["unreachable"].items():
        o.line(f"[yellow]unreachable[/] {name}: {escape(why)}")
    for error in (data.get("run") or {}).get("errors", []):
        what = escape(f"{error['cell_id']} on {error['machine']}: {error['error']}")
        o.line(f"[red]launch failed[/] {what}")


@sweep.command()
@click.argument("sweep_file", type=SWEEP_FILE)
@click.option("--to", "dest", type=click.Path(path_type=Path), help="Default ./rgt-pulls/NAME.")
@output_options
def pull(sweep_file: Path, dest: Path | None, out: Output) -> None:
    """Pull every finished cell, verified, into DIR/<cell-id>/ (+ DIR/by-group/ for compare);
    a sweep with `aggregate = "/shared/path"` collects and reconciles on that path instead."""
    from rgt.sweep.sweep import load_sweep, pull_sweep

    spec = load_sweep(sweep_file)
    if spec.aggregate and dest is None:
        return _aggregate(spec, out)
    target = (dest or Path("rgt-pulls") / spec.name).absolute()
    data = pull_sweep(Store.open(), spec, target)

    def human(o: Output) -> None:
        rows = [
            (
                r["cell_id"],
                r["state"],
                r["action"],
                "OK" if r["ok"] else "-",
                r.get("error") or r.get("reason") or "",
            )
            for r in data["cells"]
        ]
        o.table(["cell", "state", "action", "verified", "note"], rows, f"{spec.name} -> {target}")
        o.line("[green]every pulled cell verified[/]" if data["ok"] else "[red]NOT all OK[/]")

    out.result(data, human)
    if not data["ok"]:
        sys.exit(1)


def _aggregate(spec: Any, out: Output) -> None:
    from rgt.sweep._aggregate import aggregate_sweep
    from rgt.sweep.sweep import group_slug

    data = aggregate_sweep(Store.open(), spec, group_slug)

    def human(o: Output) -> None:
        rows = [(r["cell_id"], r["state"], "OK" if r["verified"] else "-", r.get("copied", ""),
                 r.get("kept", ""), r.get("error") or "") for r in data["cells"]]  # fmt: skip
        o.table(["cell", "state", "verified", "copied", "kept", "note"], rows, data["dest"])
        o.line(
            "[green]every finished cell verified there[/]" if data["ok"] else "[red]NOT all OK[/]"
        )

    out.result(data, human)
    if not data["ok"]:
        sys.exit(1)


@sweep.command()
@click.argument("sweep_file", type=SWEEP_FILE)
@click.option("--to", "dest", type=click.Path(path_type=Path), help="Where `sweep pull` put it.")
@output_options
def groups(sweep_file: Path, dest: Path | None, out: Output) -> None:
    """One run group per setting (all its seeds): the arguments `rgt verify compare` takes."""
    from rgt.sweep.sweep import groups as sweep_groups
    from rgt.sweep.sweep import load_sweep

    spec = load_sweep(sweep_file)
    target = (dest or Path("rgt-pulls") / spec.name).absolute()
    data: dict[str, Any] = {"sweep": spec.name, "groups": sweep_groups(spec, target)}

    def human(o: Output) -> None:
        rows = [(g["group"], len(g["cells"]), g["pulled"], g["path"]) for g in data["groups"]]
        o.table(["group", "cells", "pulled", "path"], rows, spec.name)
        o.line("compare two groups: rgt verify compare PATH_A PATH_B --metric NAME")

    out.result(data, human)


def register(cli: click.Group) -> None:
    cli.add_command(sweep)
