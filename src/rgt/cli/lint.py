"""`rgt lint PATH...`: the silent bugs of a training script, found before a GPU is rented."""

from __future__ import annotations

from typing import Any

import click

from rgt.cli._lint_json import document, leave
from rgt.cli._output import Output, escape, output_options

COLOURS = {"bug": "red", "warning": "yellow", "info": "cyan"}


@click.command()
@click.argument("paths", nargs=-1, required=True, metavar="PATH...")
@click.option("--select", multiple=True, metavar="CODES", help="Only these codes or prefixes.")
@click.option("--ignore", multiple=True, metavar="CODES", help="Leave out these codes or prefixes.")
@click.option("--no-cache", is_flag=True, help="Re-read every file ($RGT_HOME/cache/lint).")
@output_options
def lint(
    paths: tuple[str, ...],
    select: tuple[str, ...],
    ignore: tuple[str, ...],
    no_cache: bool,
    out: Output,
) -> None:
    """Check training code (files, folders, notebooks) for silent bugs; exit 1 on a `bug`.

    Example:  rgt lint train.py --ignore RGT5   (silence one line: `# rgt: noqa RGT101`)
    """
    from rgt.lint import lint_paths

    report = lint_paths(paths, select, ignore, cache=not no_cache)
    data = document(report)
    out.result(data, lambda o: render(o, data))
    leave(report.exit_code)


def render(o: Output, data: dict[str, Any]) -> None:
    """Human form: one finding a line with its fix, then skipped files, then the counts."""
    for f in data["findings"]:
        colour = COLOURS[f["severity"]]
        cell = f"cell {f['cell']}:" if f["cell"] else ""
        o.line(
            f"{escape(f['path'])}:{cell}{f['line']}:{f['col']}: [{colour}]{f['code']} "
            f"{f['severity']}[/] {escape(f['why'])}"
        )
        o.line(f"    fix: {escape(f['fix'])}  [dim]({escape(f['explain'])})[/]")
    for note in data["skipped"]:
        o.line(f"{escape(note['path'])}: [dim]{escape(note['reason'])}[/]")
    counts = data["counts"]
    o.line(
        f"{data['files']} file(s): {counts['bug']} bug(s), {counts['warning']} warning(s), "
        f"{counts['info']} info"
    )


def register(cli: click.Group) -> None:
    cli.add_command(lint)
