"""DELIVER: `rgt deliver init|record|check|claim|render|figure|reconcile|gate|repro`.

Thin: each command finds the workspace, calls one function of ``rgt.deliver``, prints. Library
modules are imported inside the commands so ``rgt --help`` stays light.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from rgt.cli._output import Output, escape, output_options

if TYPE_CHECKING:
    from rgt.deliver.workspace import Workspace

_DIR = click.Path(file_okay=False, path_type=Path)
_workspace_option = click.option(
    "--workspace",
    "-w",
    "workspace_dir",
    type=_DIR,
    default=None,
    help="The delivery workspace (default: the nearest one from the current directory up).",
)


def _ws(workspace_dir: Path | None, near: Path | None = None) -> Workspace:
    from rgt.verbs.deliver import workspace

    return workspace(workspace_dir, near)


@click.group()
def deliver() -> None:
    """Organise evidence, generate numbers and figures from it, disclose what VERIFY found."""


@deliver.command()
@click.argument("directory", type=_DIR, default=Path("."))
@output_options
def init(directory: Path, out: Output) -> None:
    """Scaffold a delivery workspace (runs/, figures/, findings/, EVIDENCE.json, rgt.toml)."""
    from rgt.deliver.workspace import init_workspace

    ws = init_workspace(directory)
    out.result({"workspace": str(ws.root)}, lambda o: o.line(f"workspace ready at {ws.root}"))


@deliver.command()
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@_workspace_option
@output_options
def record(run_dirs: tuple[Path, ...], workspace_dir: Path | None, out: Output) -> None:
    """Copy pulled runs into the evidence store under content-derived ids (read-only).

    All or nothing: every run is checked first, and one bad run records none of them."""
    from rgt.deliver.runs import record_runs

    ws = _ws(workspace_dir)
    results = record_runs(ws, run_dirs)
    rows = [
        {"run_id": r.run_id, "created": r.created, "verified": r.verified, "path": str(r.path)}
        for r in results
    ]

    def human(o: Output) -> None:
        for row in rows:
            state = "recorded" if row["created"] else "already recorded (no-op)"
            o.line(f"{row['run_id']}  {state}  verified={row['verified']}")

    out.result({"runs": rows}, human)


@deliver.command()
@_workspace_option
@output_options
def check(workspace_dir: Path | None, out: Output) -> None:
    """Re-hash every stored run; name each file edited after recording. Exit 1 if any."""
    from rgt.deliver.runs import check_store

    report = check_store(_ws(workspace_dir))
    data = {
        "ok": report.ok,
        "runs": report.runs,
        "files": report.files,
        "tampered": [vars(t) for t in report.tampered],
    }

    def human(o: Output) -> None:
        for t in report.tampered:
            o.line(f"[red]TAMPERED[/] run {t.run_id}: {escape(t.file)} {t.problem}")
        o.line(f"{report.runs} runs, {report.files} files: {'intact' if report.ok else 'EDITED'}")

    out.result(data, human)
    if not report.ok:
        sys.exit(1)


@deliver.group()
def claim() -> None:
    """Claims in EVIDENCE.json."""


@claim.command("add")
@click.option("--id", "claim_id", required=True)
@click.option("--text", required=True, help="The sentence the number supports.")
@click.option("--metric", required=True)
@click.option("--run", "runs", multiple=True, help="A recorded run id (repeatable).")
@click.option("--glob", "run_glob", help="A glob over recorded run ids, e.g. 'base-*'.")
@click.option("--aggregate", default="mean", show_default=True)
@click.option("--digits", type=int, default=4, show_default=True)
@click.option("--percent", is_flag=True, help="Print the value × 100 with a percent sign.")
@click.option("--figure", default=None)
@click.option("--keyword", "keywords", multiple=True, help="Words that anchor copies in text.")
@click.option("--replace", is_flag=True, help="Replace a claim with the same id.")
@_workspace_option
@output_options
def claim_add(workspace_dir: Path | None, out: Output, replace: bool, **fields: Any) -> None:
    """Add a claim; refused unless its value computes from recorded runs now."""
    from rgt.deliver.evidence import Claim, add_claim, claim_value
    from rgt.deliver.numbers import NumberFormat

    if bool(fields["runs"]) == bool(fields["run_glob"]):
        raise click.UsageError("give either --run (one or more) or --glob")
    fmt = NumberFormat.from_json({"digits": fields.pop("digits"), "percent": fields.pop("percent")})
    ws = _ws(workspace_dir)
    new = Claim(
        id=fields.pop("claim_id"), format=fmt, runs=tuple(fields.pop("runs")),
        keywords=tuple(fields.pop("keywords")), **fields,
    )  # fmt: skip
    value = claim_value(ws, add_claim(ws, new, replace_existing=replace))
    data = {**new.to_json(), "value": value.summary.value, "printed": value.printed()}
    out.result(data, lambda o: o.line(f"claim {new.id} = {value.printed()} (n={value.summary.n})"))


@claim.command("list")
@_workspace_option
@output_options
def claim_list(workspace_dir: Path | None, out: Output) -> None:
    """Every claim with its value computed from the store now."""
    from rgt.deliver.evidence import claim_value, load_claims

    ws = _ws(workspace_dir)
    values = [claim_value(ws, c) for c in load_claims(ws)]
    rows = [[v.claim.id, v.printed(), v.summary.n, v.claim.metric, v.claim.text] for v in values]
    data = [{"id": r[0], "printed": r[1], "n": r[2], "metric": r[3], "text": r[4]} for r in rows]
    out.result(data, lambda o: o.table(["claim", "value", "n", "metric", "text"], rows))


@deliver.command()
@click.argument("template", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("-o", "--out", "out_path", required=True, type=click.Path(path_type=Path))
@_workspace_option
@output_options
def render(template: Path, out_path: Path, workspace_dir: Path | None, out: Output) -> None:
    """Render TEMPLATE (Markdown, LaTeX, text) citing runs, aggregates and claims."""
    from rgt.deliver.render import render as render_template

    result = render_template(_ws(workspace_dir), template, out_path)
    data = {"out": str(result.out), "citations": result.citations}
    out.result(data, lambda o: o.line(f"{result.out}: {len(result.citations)} numbers cited"))


@deliver.command()
@click.argument("names", nargs=-1)
@_workspace_option
@output_options
def figure(names: tuple[str, ...], workspace_dir: Path | None, out: Output) -> None:
    """Build figures (all when no NAME): source data, script, pixel checks, provenance."""
    from rgt.deliver.figures import build_figure, list_figures

    ws = _ws(workspace_dir)
    built = [build_figure(ws, name) for name in names or list_figures(ws)]
    data = [
        {"figure": b.name, "image": str(b.image), "provenance": str(b.provenance),
         "digest": b.digest, "pixels": b.pixels.to_json()}
        for b in built
    ]  # fmt: skip

    def human(o: Output) -> None:
        for b in built:
            seen = "" if b.pixels.series_seen is None else f", {b.pixels.series_seen} series"
            o.line(f"[green]OK[/] {b.name}: {b.image} ({b.pixels.width}x{b.pixels.height}{seen})")

    out.result(data, human)


@deliver.command()
@click.argument("path", type=_DIR, required=False)
@click.option(
    "--tolerance",
    type=float,
    default=0.02,
    show_default=True,
    help="How far (relative) a number may be from the value to count as a stale copy.",
)
@click.option("--update", is_flag=True, help="Write each claim's appears_in (file:line).")
@_workspace_option
@output_options
def reconcile(
    path: Path | None, tolerance: float, update: bool, workspace_dir: Path | None, out: Output
) -> None:
    """Scan a repository for copies of claimed numbers; exit 1 when a copy drifted."""
    from rgt.deliver.reconcile import reconcile as run_reconcile

    ws = _ws(workspace_dir, near=path)
    report = run_reconcile(path or ws.root, ws, tolerance=tolerance, update=update)

    def human(o: Output) -> None:
        for hit in report.drifts:
            where = escape(f"{hit.file}:{hit.line} {hit.claim}")
            o.line(f"[red]DRIFT[/] {where}: found {hit.found}, evidence {hit.expected:.6g}")
        for hit in report.possible:
            where = escape(f"{hit.file}:{hit.line} {hit.claim}")
            o.line(f"[yellow]POSSIBLE DRIFT[/] {where}: {hit.found}, evidence {hit.expected:.6g}")
        for claim_id in report.missing:
            o.line(f"[yellow]MISSING[/] {claim_id}: appears nowhere")
        o.line(f"{report.files} files, {len(report.ok)} copies ok, {len(report.drifts)} drifted")

    out.result(report.to_json(), human)
    if report.drifts:
        sys.exit(1)


@deliver.command()
@click.option(
    "--strict", is_flag=True, help="Exit 1 when any claim has an unresolved bug or warning finding."
)
@_workspace_option
@output_options
def gate(strict: bool, workspace_dir: Path | None, out: Output) -> None:
    """Write DISCLOSURE.md: each claim with n, CI, data hashes and every finding on its runs."""
    from rgt.deliver.gate import gate as run_gate

    report = run_gate(_ws(workspace_dir))
    out.result(report.to_json(), lambda o: o.line(escape(report.path.read_text(encoding="utf-8"))))
    if strict and report.strict_failed:
        sys.exit(1)


@deliver.command()
@click.option("--check", "check_it", is_flag=True, help="Run it in a clean clone; compare hashes.")
@_workspace_option
@output_options
def repro(check_it: bool, workspace_dir: Path | None, out: Output) -> None:
    """Write repro.sh (rebuilds every figure and document); --check runs it in a clean clone."""
    from rgt.deliver.repro import check_repro, write_repro

    ws = _ws(workspace_dir)
    script = write_repro(ws)
    if not check_it:
        out.result({"script": str(script)}, lambda o: o.line(f"wrote {script}"))
        return
    report = check_repro(ws)

    def human(o: Output) -> None:
        for c in report.checks:
            colour = "green" if c.status == "REPRODUCED" else "red"
            o.line(f"[{colour}]{c.status}[/] {escape(c.path)}")
        if not report.ok:
            o.line(escape(report.log_tail))

    out.result(report.to_json(), human)
    if not report.ok:
        sys.exit(1)


def register(cli_group: click.Group) -> None:
    cli_group.add_command(deliver)
