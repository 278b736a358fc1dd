"""The one output sink of the CLI: human (rich) or ``--json`` (one JSON document on stdout).

Data goes to stdout, chatter (progress, hints, warnings) to stderr, so ``rgt X --json | jq``
always parses.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import click

if TYPE_CHECKING:
    from rich.console import Console

F = TypeVar("F", bound=Callable[..., Any])


def escape(text: str) -> str:
    """rich's markup escape; rich itself is imported only when something is printed for a
    human (a ``--json`` run never loads it: ~60 ms of every command's start)."""
    from rich.markup import escape as rich_escape

    return rich_escape(text)


class Output:
    def __init__(self, json_mode: bool) -> None:
        self.json_mode = json_mode

    @functools.cached_property
    def out(self) -> Console:
        from rich.console import Console

        return Console(soft_wrap=True, highlight=False)

    @functools.cached_property
    def err(self) -> Console:
        from rich.console import Console

        return Console(stderr=True, soft_wrap=True, highlight=False)

    def result(
        self, data: Any, human: Callable[[Output], None] | None = None, dense: bool = False
    ) -> None:
        """Emit the command's result: the JSON document (``dense``: no indentation, for
        documents an agent polls), or the human rendering."""
        if self.json_mode:
            layout: dict[str, Any] = {"separators": (",", ":")} if dense else {"indent": 2}
            sys.stdout.write(json.dumps(data, sort_keys=True, default=str, **layout) + "\n")
            sys.stdout.flush()
        elif human is not None:
            human(self)
        else:
            self.out.print_json(json.dumps(data, default=str))

    def info(self, message: str) -> None:
        """Chatter for humans; silent in --json mode (stdout must stay one document)."""
        if not self.json_mode:
            self.err.print(message)

    def warn(self, message: str) -> None:
        """A warning's text is data (paths, names from a machine), never markup."""
        self.err.print(f"[yellow]warning:[/] {escape(message)}")

    def table(
        self,
        columns: Sequence[str],
        rows: Iterable[Sequence[Any]],
        title: str | None = None,
        whole: Sequence[str] = (),
    ) -> None:
        """``whole``: columns never shortened or wrapped (ids a user copies into a command)."""
        from rich.table import Table

        cells = [["" if v is None else str(v) for v in row] for row in rows]
        table = Table(title=title, show_lines=False)
        for index, column in enumerate(columns):
            if column in whole:
                width = max([len(column)] + [len(row[index]) for row in cells])
                table.add_column(column, no_wrap=True, min_width=width)
            else:
                table.add_column(column)
        for row in cells:
            # Cells are data, never markup: "[stopped]" must print as itself.
            table.add_row(*(escape(v) for v in row))
        self.out.print(table)

    def line(self, message: str = "") -> None:
        """``message`` is rich markup: wrap every value from data in ``escape()``, or a
        ``[heartbeat_lost]``, ``[rank0]`` or ``/data/[x]`` in it silently disappears."""
        self.out.print(message)


def output_options(func: F) -> F:
    """Add ``--json`` to a command and pass it an ``out: Output``."""

    @click.option("--json", "json_mode", is_flag=True, help="Print one JSON document on stdout.")
    @functools.wraps(func)
    def wrapper(*args: Any, json_mode: bool, **kwargs: Any) -> Any:
        ctx = click.get_current_context()
        ctx.meta["rgt.json"] = json_mode
        return func(*args, out=Output(json_mode), **kwargs)

    return wrapper  # type: ignore[return-value]
