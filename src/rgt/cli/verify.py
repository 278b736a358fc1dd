"""VERIFY: `rgt verify artifacts | compare | leakage | selection | collapse | tracker`."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from rgt.cli._output import Output, escape, output_options

if TYPE_CHECKING:
    from rgt.verify.artifacts import VerifyReport
    from rgt.verify.findings import Finding


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
        what = escape(f"{check.kind:<11} {check.path}  {_size(check.bytes)}  {check.detail}")
        out.line(f"{_MARKS[check.verdict]} {what}")

    report = verify_tree(directory, declared, progress=None if out.json_mode else line)
    if not out.json_mode:
        _summary(out, report)
    out.result(report.to_json(), lambda o: None)
    if not report.ok:
        sys.exit(1)  # the report is printed; exit 1 says 'not verified' to scripts and gates


_MARKS = {"ok": "[green]OK  [/]", "hash_only": "[yellow]HASH[/]", "bad": "[red]BAD [/]"}


def _summary(out: Output, report: VerifyReport) -> None:
    for unit in report.units:
        said = f"{unit.layout} checkpoint {unit.path}/ ({unit.files} files): {unit.detail}"
        out.line(f"{_MARKS[unit.verdict]} {escape(said)}")
    for rel in report.missing:
        out.line(f"[red]MISSING[/]  {escape(rel)}  (declared in the manifest, not on disk)")
    for rel in report.unexpected:
        out.line(f"[yellow]UNEXPECTED[/] {escape(rel)}  (on disk, not in the manifest)")
    total = _size(sum(f.bytes for f in report.files))
    counts = report.counts()
    said = f"{counts['ok']} ok, {counts['hash_only']} hash_only, {counts['bad']} bad"
    if report.ok:
        out.line(f"[green]100 % OK[/]: {len(report.files)} files, {total}: {said}")
        if counts["hash_only"]:
            out.line("  hash_only: the bytes match, the format names code rgt does not run")
        return
    if not report.files:
        out.line("[red]FAILED[/]: no files to verify")
        return
    # A checkpoint folder can be bad while every file in it is sound (a shard never written):
    # the failure names what failed, never "0 files bad".
    bad_units = [unit for unit in report.units if unit.verdict == "bad"]
    units = f"{len(bad_units)} checkpoint folder(s) bad, " if bad_units else ""
    out.line(
        f"[red]FAILED[/]: {units}{counts['bad']} of {len(report.files)} files bad ({said}), "
        f"{len(report.missing)} missing, {len(report.unexpected)} unexpected"
    )


@verify.command()
@click.argument("a")
@click.argument("b")
@click.option("--metric", required=True, help="Metric name as recorded in results.json.")
@click.option(
    "--direction", type=click.Choice(["max", "min"]), help="Override: max = higher is better."
)
@click.option(
    "--sesoi",
    type=float,
    help="Smallest effect of interest, in metric units (enables the equivalence test).",
)
@click.option("--alpha", type=float, default=0.05, show_default=True, help="Test level.")
@output_options
def compare(
    a: str,
    b: str,
    metric: str,
    direction: str | None,
    sesoi: float | None,
    alpha: float,
    out: Output,
) -> None:
    """Effect, noise or bug between run groups A and B (a run dir, a dir of runs, or a glob)."""
    from rgt.verify.compare import compare as compare_groups

    result = compare_groups(a, b, metric, direction=direction, sesoi=sesoi, alpha=alpha)

    def human(o: Output) -> None:
        direction = result.direction or "direction unknown"
        o.line(f"[bold]{result.verdict}[/]  {result.metric} ({direction})")
        o.line(f"  A: mean {result.mean_a:.4g}, sd {result.sd_a:.3g}, n {result.n_a}")
        o.line(f"  B: mean {result.mean_b:.4g}, sd {result.sd_b:.3g}, n {result.n_b}")
        o.line(f"  {result.explanation}")
        if result.changed_keys:
            o.line(f"  config keys that differ: {', '.join(result.changed_keys)}")
        for finding in result.findings:
            colour = _COLOURS[finding.severity]
            o.line(f"  [{colour}]{finding.severity}[/] {finding.kind}: {finding.message}")

    out.result(_with_source(result.to_json(), result.findings, "compare"), human)


_COLOURS = {"bug": "red", "warning": "yellow", "info": "blue"}


def _print_findings(out: Output, findings: list[Finding], clean: str, source: str) -> None:
    """``--json`` prints ``{"findings": [...]}``: saved into a delivery's ``findings/``, the
    disclosure gate reads it as is (run directories made absolute so they match later)."""
    from rgt.verify.findings import stamped

    findings = stamped(findings, f"rgt verify {source}")

    def human(o: Output) -> None:
        for finding in findings:
            colour = _COLOURS[finding.severity]
            o.line(f"[{colour}]{finding.severity}[/] {finding.kind}: {finding.message}")
            for example in finding.evidence.get("examples", []):
                o.line(f"    {example}")
        if not findings:
            o.line(f"[green]ok[/]: {clean}")

    out.result({"findings": [f.to_json() for f in findings]}, human)


@verify.command()
@click.option(
    "--train",
    "train",
    required=True,
    type=click.Path(exists=True, path_type=Path),
    help="Hash list (one content hash per line) or a directory of training samples.",
)
@click.option(
    "--test",
    "test",
    required=True,
    type=click.Path(exists=True, path_type=Path),
    help="Hash list or directory of the evaluation split.",
)
@click.option("--split", default="test", show_default=True, help="Name of the evaluated split.")
@output_options
def leakage(train: Path, test: Path, split: str, out: Output) -> None:
    """Evaluation samples whose content also occurs in the training data."""
    from rgt.verify.probes import leakage as find_leaks
    from rgt.verify.probes import read_hash_list

    findings = find_leaks(read_hash_list(train), read_hash_list(test), split=split)
    _print_findings(out, findings, f"no {split} sample occurs in train", "leakage")


@verify.command()
@click.argument("runs", nargs=-1, required=True)
@output_options
def selection(runs: tuple[str, ...], out: Output) -> None:
    """Runs whose model selection read the test split, or that lack a validation split."""
    from rgt.results import find_runs
    from rgt.verify.selection import selection_findings

    found = [run for spec in runs for run in find_runs(spec)]
    _print_findings(
        out, selection_findings(found), f"{len(found)} run(s): no test-set selection", "selection"
    )


@verify.command()
@click.argument("predictions", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--key", help="Array name inside an .npz (default: the first).")
@click.option("--real-metric", type=float, help="Metric on the real inputs.")
@click.option("--shuffled-metric", type=float, help="Same metric with inputs shuffled.")
@output_options
def collapse(
    predictions: Path,
    key: str | None,
    real_metric: float | None,
    shuffled_metric: float | None,
    out: Output,
) -> None:
    """Constant outputs, dead embedding dimensions, a model that ignores its input (.npy/.npz)."""
    from rgt.verify.probes import collapse as find_collapse
    from rgt.verify.probes import load_predictions, shuffled_gap

    findings = find_collapse(load_predictions(predictions, key))
    if real_metric is not None and shuffled_metric is not None:
        findings += shuffled_gap(real_metric, shuffled_metric)
    _print_findings(out, findings, "outputs vary with the input", "collapse")


@verify.command()
@click.argument("path", type=click.Path(exists=True, path_type=Path))
@click.option(
    "--results",
    "results",
    multiple=True,
    help="results.json runs to compare with (file, run dir or glob; repeatable). "
    "Those found under PATH are always used.",
)
@click.option(
    "--stale-after",
    type=float,
    default=60.0,
    show_default=True,
    help="Minutes without a write after which a 'running' run counts as dead.",
)
@output_options
def tracker(path: Path, results: tuple[str, ...], stale_after: float, out: Output) -> None:
    """Forensics over MLflow, TensorBoard, W&B offline and trackio data under PATH."""
    from rgt.results import find_runs
    from rgt.verify.tracker import scan

    extra = [run for spec in results for run in find_runs(spec)]
    report = scan(path, results=extra, stale_after=stale_after * 60)
    counts = ", ".join(f"{v['runs']} {source}" for source, v in report.sources.items())

    def human(o: Output) -> None:
        o.line(f"{len(report.runs)} run(s) read: {counts or 'no tracker data found'}")
        for finding in report.findings:
            o.line(f"[{_COLOURS[finding.severity]}]{finding.severity}[/] {finding.message}")
        if report.runs and not report.findings:
            o.line("[green]ok[/]: no duplicate, stale or inconsistent runs")

    out.result(_with_source(report.to_json(), report.findings, "tracker"), human)


def _with_source(data: dict[str, Any], findings: Sequence[Finding], command: str) -> dict[str, Any]:
    """The document with its findings as ``rgt deliver gate`` reads them from ``findings/``."""
    from rgt.verify.findings import stamped

    data["findings"] = [f.to_json() for f in stamped(findings, f"rgt verify {command}")]
    return data


def register(cli_group: click.Group) -> None:
    cli_group.add_command(verify)
