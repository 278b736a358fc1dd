"""VERIFY: `rgt verify artifacts | compare | leakage | selection | collapse`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from rgt.cli._output import Output, output_options

if TYPE_CHECKING:
    from rgt.verify.artifacts import VerifyReport


@click.group()
def verify() -> None:
    """Is the number real? Artifact checks, run comparisons, integrity probes."""


def _size(n: int) -> str:
    for unit, scale in (("GB", 1 << 30), ("MB", 1 << 20), ("kB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


@verify.command()
@click.argument("directory", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "--manifest",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The agent's manifest.json (default: DIRECTORY/manifest.json when present).",
)
@output_options
def artifacts(directory: Path, manifest: Path | None, out: Output) -> None:
    """Load-verify every artifact under DIRECTORY: type, finiteness, declared size and sha256."""
    from rgt.verify.artifacts import MANIFEST_NAME, FileCheck, load_manifest, verify_tree

    if manifest is None and (directory / MANIFEST_NAME).is_file():
        manifest = directory / MANIFEST_NAME
        out.info(f"using {manifest}")
    declared = load_manifest(manifest) if manifest is not None else None

    def line(check: FileCheck) -> None:
        mark = "[green]OK  [/]" if check.ok else "[red]FAIL[/]"
        out.line(f"{mark} {check.kind:<11} {check.path}  {_size(check.bytes)}  {check.detail}")

    report = verify_tree(directory, declared, progress=None if out.json_mode else line)
    if not out.json_mode:
        _summary(out, report)
    out.result(report.to_json(), lambda o: None)
    if not report.ok:
        sys.exit(1)  # the report is printed; exit 1 says 'not verified' to scripts and gates


def _summary(out: Output, report: VerifyReport) -> None:
    for rel in report.missing:
        out.line(f"[red]MISSING[/]  {rel}  (declared in the manifest, not on disk)")
    for rel in report.unexpected:
        out.line(f"[yellow]UNEXPECTED[/] {rel}  (on disk, not in the manifest)")
    total = _size(sum(f.bytes for f in report.files))
    if report.ok:
        out.line(f"[green]100 % OK[/]: {len(report.files)} files, {total}, all load-verified")
        return
    if not report.files:
        out.line("[red]FAILED[/]: no files to verify")
        return
    out.line(
        f"[red]FAILED[/]: {len(report.failures)} of {len(report.files)} files failed, "
        f"{len(report.missing)} missing, {len(report.unexpected)} unexpected"
    )


def register(cli_group: click.Group) -> None:
    cli_group.add_command(verify)
