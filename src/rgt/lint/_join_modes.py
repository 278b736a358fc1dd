"""Cross-file evaluations of a model an object keeps from its constructor (``_flow_held``):
``Evaluator(model).run(loader)`` in the training script, ``Evaluator.run`` in another module
running ``self.model`` in a loop without ``.eval()`` (``_flow_modes.runners``)."""

from __future__ import annotations

from collections.abc import Iterator

from rgt.lint._flow_modes import HELD
from rgt.lint._join_base import Site, callee, show
from rgt.lint._project import Project, Summary


def sites(project: Project, path: str, summary: Summary) -> Iterator[Site]:
    for line, col, ref, index, model, why, looping in summary.get("ctor_calls", ()):
        target = callee(project, path, ref)
        where = project.summaries.get(target[0], {}) if target else {}
        runner = where.get("runners", {}).get(target[1]) if target else None
        if runner is None or target is None or not (runner[2] or looping):
            continue
        cls = target[1].rpartition(".")[0]
        kept = where.get("kept_params", {}).get(cls, {})
        ran = [n for p, n in runner[1] if p == HELD and kept.get(n) == index]
        if ran:
            at = show(target[0], runner[0], path)
            detail = (f"`{target[1]}` ({at}) runs `{ran[0]}`, the `{model}` handed to `{cls}` "
                      f"here, in a loop and never calls .eval(); `{model}` is in training mode: "
                      f"{why}")  # fmt: skip
            yield path, line, col, "RGT201", detail


def made_in_eval(project: Project, path: str, summary: Summary) -> Iterator[Site]:
    """A model trained here that a factory (``_flow_evals.eval_returns``) hands back in
    eval mode, never put in training mode here: RGT202 at the call that builds it."""
    for line, col, spelled, name in summary.get("eval_made", ()):
        target = project.lookup(path, spelled)
        where = project.summaries.get(target[0], {}) if target else {}
        at = where.get("eval_returns", {}).get(target[1]) if target else None
        if target is not None and at is not None:
            detail = (f"`{target[1]}` ({show(target[0], at, path)}) returns the model in eval "
                      f"mode, and `{name}` is trained here without a .train()")  # fmt: skip
            yield path, line, col, "RGT202", detail
