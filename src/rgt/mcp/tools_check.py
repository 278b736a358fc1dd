"""VERIFY and DELIVER tools: ``rgt verify …`` and ``rgt deliver …`` with ``--json``.

A command that exits 1 with a document (a drifted number, a file that failed to load) comes
back as a tool error whose message is that document: the finding is never lost in a success.
"""

from __future__ import annotations

from typing import Any

from rgt.mcp._invoke import invoke


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
    return invoke(
        ["verify", "compare"], [a, b], metric=metric, direction=direction, sesoi=sesoi, alpha=alpha
    )


def verify_artifacts(directory: str, manifest: str | None = None) -> dict[str, Any]:
    """Load every artifact in `directory` by type (torch, safetensors, npz, json, csv, images):
    non-empty, finite, hashes against the manifest."""
    return invoke(["verify", "artifacts"], [directory], manifest=manifest)


def verify_leakage(train: str, test: str, split: str = "test") -> dict[str, Any]:
    """Samples shared between the training data and an evaluation split, by content hash
    (`train`/`test`: a hash list, one per line, or a directory of samples)."""
    return invoke(["verify", "leakage"], train=train, test=test, split=split)


def verify_selection(runs: list[str]) -> dict[str, Any]:
    """Was the test split touched during model selection? `runs`: run dirs or globs."""
    return invoke(["verify", "selection"], runs)


def verify_collapse(
    predictions: str,
    key: str | None = None,
    real_metric: float | None = None,
    shuffled_metric: float | None = None,
) -> dict[str, Any]:
    """Constant outputs, dead dimensions, or a model that ignores its input (.npy/.npz of
    predictions; with both metrics, the gap between real and shuffled inputs)."""
    return invoke(
        ["verify", "collapse"],
        [predictions],
        key=key,
        real_metric=real_metric,
        shuffled_metric=shuffled_metric,
    )


def deliver_init(directory: str = ".") -> dict[str, Any]:
    """Scaffold a delivery workspace (runs/, figures/, findings/, EVIDENCE.json, rgt.toml)."""
    return invoke(["deliver", "init"], [directory])


def deliver_record(run_dirs: list[str], workspace: str | None = None) -> dict[str, Any]:
    """Copy pulled runs into the evidence store under content-derived ids (read-only, all or
    nothing; recording the same run again is a no-op)."""
    return invoke(["deliver", "record"], run_dirs, workspace=workspace)


def deliver_render(template: str, output: str, workspace: str | None = None) -> dict[str, Any]:
    """Render a document template whose numbers cite results.json keys or EVIDENCE.json
    claims into `output` (numbers are generated, never retyped)."""
    return invoke(["deliver", "render"], [template], out=output, workspace=workspace)


def deliver_reconcile(
    path: str | None = None,
    tolerance: float = 0.02,
    update: bool = False,
    workspace: str | None = None,
) -> dict[str, Any]:
    """Scan a repository for copies of claimed numbers; a drifted copy is an error result
    listing file:line. `update` writes each claim's appears_in."""
    return invoke(
        ["deliver", "reconcile"],
        [path] if path else [],
        tolerance=tolerance,
        update=update,
        workspace=workspace,
    )


def deliver_gate(strict: bool = False, workspace: str | None = None) -> dict[str, Any]:
    """Write DISCLOSURE.md: each claim with n, CI, data hashes and every VERIFY finding on its
    runs. It discloses; it never blocks (unless `strict`)."""
    return invoke(["deliver", "gate"], strict=strict, workspace=workspace)
