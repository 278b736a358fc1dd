"""``rgt profiles``: list profiles, show one's survival matrix and clocks, find stale facts.

rgt profiles                     name, kind, backend, verified month, origin
rgt profiles autodl              survival matrix, meter stop, danger clocks
rgt profiles --stale [--months N]
"""

from __future__ import annotations

from datetime import date
from typing import Any

import click

from rgt.autostop.view import profile_words as autostop_words
from rgt.cli._output import Output, escape, output_options
from rgt.profiles import (
    DEFAULT_MONTHS,
    Profile,
    StaleFact,
    list_profiles,
    load_profile,
    stale_facts,
    survival_word,
)
from rgt.verbs.profiles import listing, profile_document, stale_document


def register(group: click.Group) -> None:
    group.add_command(profiles)


@click.command()
@click.argument("name", required=False)
@click.option("--stale", is_flag=True, help="List facts last verified more than N months ago.")
@click.option(
    "--months",
    type=click.IntRange(min=0),
    default=DEFAULT_MONTHS,
    show_default=True,
    help="Age limit for --stale, in months.",
)
@click.option(
    "--today",
    type=click.DateTime(formats=["%Y-%m-%d"]),
    hidden=True,
    help="Pretend today is this date (for --stale).",
)
@output_options
def profiles(name: str | None, stale: bool, months: int, today: Any, out: Output) -> None:
    """List platform profiles, or show one: what survives, what bills, its danger clocks."""
    if stale:
        day = today.date() if today else date.today()
        facts = stale_facts(months, day)
        out.result(stale_document(facts, months, day), lambda o: _stale_human(o, facts, months))
    elif name:
        profile = load_profile(name)
        out.result(profile_document(profile), lambda o: _profile_human(o, profile))
    else:
        found = list_profiles()
        out.result(listing(found), lambda o: _list_human(o, found))


def _list_human(out: Output, found: list[Profile]) -> None:
    rows = [
        (
            p.name,
            p.kind,
            p.backend,
            p.verified,
            p.origin + " (overrides bundled)" * p.overrides_bundled,
        )
        for p in found
    ]
    out.table(["name", "kind", "backend", "verified", "origin"], _escaped(rows), title="profiles")


def _profile_human(out: Output, p: Profile) -> None:
    head = f"{p.title} ({p.name}): {p.kind}, backend {p.backend}, verified {p.verified}"
    _say(out, head, *p.origin_notes())
    _survival_human(out, p)
    stop = p.meter_stop
    kind = "irreversible" if stop.irreversible else "reversible"
    _say(out, f"meter stop: {stop.action} ({kind}) via {stop.command}{stop.stamp.suffix()}")
    _say(out, *(f"  still bills: {item}" for item in stop.still_bills))
    _say(out, *autostop_words(p.raw))  # README: Autostop
    _say(out, "danger clocks:")
    _say(
        out,
        *(
            f"  {c.name} ({c.when}): {c.trigger} ({c.duration}) -> {c.consequence}"
            f"{c.stamp.suffix()}"
            for c in p.clocks
        ),
    )
    _say(out, f"durable dir: {p.durable_dir}   detach: {p.detach.primitive}")


def _survival_human(out: Output, p: Profile) -> None:
    columns = ["path", "survives stop", "survives destroy", "bills when stopped", "verified"]
    rows = [
        (
            t.path,
            survival_word(t.survives_stop),
            survival_word(t.survives_destroy),
            survival_word(t.bills_when_stopped),
            _stamp_cell(t.stamp.verified, t.stamp.status),
        )
        for t in p.storage
    ]
    out.table(columns, _escaped(rows), title="survival matrix")
    _say(
        out,
        *(
            f"  {t.path}: {t.name}, {t.speed}, {t.size_cap}"
            + (f"; {t.stamp.note}" if t.stamp.note else "")
            for t in p.storage
        ),
    )


def _say(out: Output, *lines: str) -> None:
    """Profile text is data, not rich markup: '[stopped]' must print as typed."""
    for line in lines:
        out.line(escape(line))


def _escaped(rows: list[tuple[Any, ...]]) -> list[tuple[str, ...]]:
    return [tuple(escape(str(cell)) for cell in row) for row in rows]


def _stamp_cell(month: str, status: str) -> str:
    return month if status == "verified" else f"{month} ({status})"


def _stale_human(out: Output, facts: list[StaleFact], months: int) -> None:
    if not facts:
        out.line(f"no fact is older than {months} months")
        return
    rows = _escaped(
        [(f.profile, f.fact, f.verified, f.age_months, f.status, f.source) for f in facts]
    )
    out.table(
        ["profile", "fact", "verified", "months old", "status", "source"],
        rows,
        title=f"facts older than {months} months: re-check them before trusting them",
    )
