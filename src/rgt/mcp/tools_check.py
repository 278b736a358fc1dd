"""VERIFY and DELIVER tools: what ``rgt verify …`` and ``rgt deliver …`` print with ``--json``,
from the same library calls (``rgt.verify``, ``rgt.deliver``).

A result the command exits 1 on (a drifted number, a file that failed to load) comes back as a
tool error whose message is that document: the finding is never lost in a success. A path the
command line would refuse before running (it must exist) is refused here the same way, as a
usage error with its fix.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rgt.errors import UsageError
from rgt.mcp._call import as_command, document
from rgt.verbs.deliver import workspace as _workspace

if TYPE_CHECKING:
    from rgt.verify.findings import Finding


def verify_compare(
    a: str,
    b: str,
    metric: str,
    direction: str | None = None,
    sesoi: float | None = None,
    alpha: float = 0.05,
) -> dict[str, Any]:
    """Is the difference real? Run groups A and B (a run dir, a dir of runs, or a glob; seeds
    are the unit) → effect / noise / bug / inconclusive, with the CI, the minimum detectable
    effect and the config keys that differ. `direction`: "max" or "min" when not registered."""
    from rgt.verify.compare import compare

    flags = {"metric": metric, "direction": direction, "sesoi": sesoi, "alpha": alpha}
    with as_command(["verify", "compare"], [a, b], **flags):
        if direction not in (None, "max", "min"):
            raise UsageError(f"direction {direction!r} is neither max nor min", fix="max or min")
        result = compare(a, b, metric, direction=direction, sesoi=sesoi, alpha=alpha)
        return document({**result.to_json(), **_findings(result.findings, "compare")})


def verify_artifacts(directory: str, manifest: str | None = None) -> dict[str, Any]:
    """Load every artifact in `directory` by type (torch, safetensors, npz, json, csv, images):
    non-empty, finite, hashes against the manifest."""
    from rgt.verify.artifacts import MANIFEST_NAME, load_manifest, verify_tree

    with as_command(["verify", "artifacts"], [directory], manifest=manifest):
        root = _existing(directory, "directory", want_dir=True)
        given = _existing(manifest, "manifest", want_dir=False) if manifest else None
        if given is None and (root / MANIFEST_NAME).is_file():
            given = root / MANIFEST_NAME
        report = verify_tree(root, load_manifest(given) if given is not None else None)
        return document(report.to_json(), exit_code=0 if report.ok else 1)


def verify_leakage(train: str, test: str, split: str = "test") -> dict[str, Any]:
    """Samples shared between the training data and an evaluation split, by content hash
    (`train`/`test`: a hash list, one per line, or a directory of samples)."""
    from rgt.verify.probes import leakage, read_hash_list

    with as_command(["verify", "leakage"], train=train, test=test, split=split):
        seen = read_hash_list(_existing(train, "train"))
        held = read_hash_list(_existing(test, "test"))
        return document(_findings(leakage(seen, held, split=split), "leakage"))


def verify_selection(runs: list[str]) -> dict[str, Any]:
    """Was the test split touched during model selection? `runs`: run dirs or globs."""
    from rgt.results import find_runs
    from rgt.verify.selection import selection_findings

    with as_command(["verify", "selection"], runs):
        found = [run for spec in runs for run in find_runs(spec)]
        return document(_findings(selection_findings(found), "selection"))


def verify_collapse(
    predictions: str,
    key: str | None = None,
    real_metric: float | None = None,
    shuffled_metric: float | None = None,
) -> dict[str, Any]:
    """Constant outputs, dead dimensions, or a model that ignores its input (.npy/.npz of
    predictions; with both metrics, the gap between real and shuffled inputs)."""
    from rgt.verify.probes import collapse, load_predictions, shuffled_gap

    flags = {"key": key, "real_metric": real_metric, "shuffled_metric": shuffled_metric}
    with as_command(["verify", "collapse"], [predictions], **flags):
        path = _existing(predictions, "predictions", want_dir=False)
        found = collapse(load_predictions(path, key))
        if real_metric is not None and shuffled_metric is not None:
            found += shuffled_gap(real_metric, shuffled_metric)
        return document(_findings(found, "collapse"))


def _findings(findings: Sequence[Finding], command: str) -> dict[str, Any]:
    """``{"findings": [...]}`` as ``rgt deliver gate`` reads them from ``findings/``."""
    from rgt.verify.findings import stamped

    return {"findings": [f.to_json() for f in stamped(findings, f"rgt verify {command}")]}


def _existing(path: str, name: str, want_dir: bool | None = None) -> Path:
    """``path`` when it exists (a directory when ``want_dir``, a file when it is False)."""
    found = Path(path)
    kind = {True: "directory", False: "file", None: "file or directory"}[want_dir]
    if not found.exists() or (want_dir is not None and found.is_dir() != want_dir):
        raise UsageError(f"{name}: {path!r} is no existing {kind}", fix=f"pass an existing {kind}")
    return found


def _path(given: str | None) -> Path | None:
    return None if given is None else Path(given)


def deliver_init(directory: str = ".") -> dict[str, Any]:
    """Scaffold a delivery workspace (runs/, figures/, findings/, EVIDENCE.json, rgt.toml)."""
    from rgt.deliver.workspace import init_workspace

    with as_command(["deliver", "init"], [directory]):
        if Path(directory).is_file():
            raise UsageError(f"{directory!r} is a file", fix="pass a directory")
        return document({"workspace": str(init_workspace(Path(directory)).root)})


def deliver_record(run_dirs: list[str], workspace: str | None = None) -> dict[str, Any]:
    """Copy pulled runs into the evidence store under content-derived ids (read-only, all or
    nothing; recording the same run again is a no-op)."""
    from rgt.deliver.runs import record_runs

    with as_command(["deliver", "record"], run_dirs, workspace=workspace):
        dirs = [_existing(run_dir, "run") for run_dir in run_dirs]
        results = record_runs(_workspace(_path(workspace)), dirs)
        keys = ("run_id", "created", "verified")
        rows = [{**{k: getattr(r, k) for k in keys}, "path": str(r.path)} for r in results]
        return document({"runs": rows})


def deliver_render(template: str, output: str, workspace: str | None = None) -> dict[str, Any]:
    """Render a document template whose numbers cite results.json keys or EVIDENCE.json
    claims into `output` (numbers are generated, never retyped)."""
    from rgt.deliver.render import render

    with as_command(["deliver", "render"], [template], out=output, workspace=workspace):
        source = _existing(template, "template", want_dir=False)
        result = render(_workspace(_path(workspace)), source, Path(output))
        return document({"out": str(result.out), "citations": result.citations})


def deliver_reconcile(
    path: str | None = None,
    tolerance: float = 0.02,
    update: bool = False,
    workspace: str | None = None,
) -> dict[str, Any]:
    """Scan a repository for copies of claimed numbers; a drifted copy is an error result
    listing file:line. `update` writes each claim's appears_in."""
    from rgt.deliver.reconcile import reconcile

    flags = {"tolerance": tolerance, "update": update, "workspace": workspace}
    with as_command(["deliver", "reconcile"], [path] if path else [], **flags):
        near = Path(path) if path else None
        ws = _workspace(_path(workspace), near)
        report = reconcile(near or ws.root, ws, tolerance=tolerance, update=update)
        return document(report.to_json(), exit_code=1 if report.drifts else 0)


def deliver_gate(strict: bool = False, workspace: str | None = None) -> dict[str, Any]:
    """Write DISCLOSURE.md: each claim with n, CI, data hashes and every VERIFY finding on its
    runs. It discloses; it never blocks (unless `strict`)."""
    from rgt.deliver.gate import gate

    with as_command(["deliver", "gate"], strict=strict, workspace=workspace):
        report = gate(_workspace(_path(workspace)))
        return document(report.to_json(), exit_code=1 if strict and report.strict_failed else 0)
