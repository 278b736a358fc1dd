"""`rgt explain TOPIC|LABEL|CODE`: why a failure happens and what to do, in order of cost.

The entries are Markdown files in the package (``rgt.knowledge``); this prints one (rich
Markdown at a terminal, the plain text when piped) or lists them all.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from rgt.cli._output import Output, output_options
from rgt.errors import UsageError


@click.command()
@click.argument("topic", required=False, metavar="TOPIC|LABEL|CODE")
@click.option("--list", "list_all", is_flag=True, help="List every entry (id, kind, title).")
@output_options
def explain(topic: str | None, list_all: bool, out: Output) -> None:
    """Why a failure happens and what to do: every triage label, lint code and topic.

    Example:  rgt explain cuda_oom   rgt explain RGT301   rgt explain oom-ladder
    """
    from rgt import knowledge

    if list_all:
        rows = [e.summary() for e in knowledge.entries()]
        out.result({"count": len(rows), "entries": rows}, lambda o: _list_human(o, rows))
        return
    if topic is None:
        raise UsageError("a TOPIC, LABEL or CODE is needed", fix="rgt explain --list")
    entry = knowledge.lookup(topic)
    data = entry.to_dict()
    out.result(data, lambda o: _entry_human(o, data))


def _list_human(o: Output, rows: list[dict[str, str]]) -> None:
    o.table(["id", "kind", "title"], [(r["id"], r["kind"], r["title"]) for r in rows], whole=["id"])
    o.line(f"{len(rows)} entries: rgt explain ID")


def _entry_human(o: Output, data: dict[str, Any]) -> None:
    sources = "\n".join(f"- {s}" for s in data["sources"])
    text = f"# {data['title']}  ({data['kind']} `{data['id']}`)\n\n{data['body']}\n"
    text += f"## Sources\n\n{sources}\n"
    if not sys.stdout.isatty():  # piped: the Markdown itself, for grep, less and agents
        sys.stdout.write(text)
        return
    from rich.console import Console
    from rich.markdown import Markdown

    # Not the sink's soft-wrapping console: Markdown lays out its own lines (list items
    # would be cut at the terminal's edge).
    Console(highlight=False).print(Markdown(text))


def register(cli: click.Group) -> None:
    cli.add_command(explain)
