"""Cross-file findings about what goes into a loss (``RGT101``-``RGT103``): a model whose
``forward`` ends in softmax/sigmoid, defined in one file, whose output reaches a loss in another
(directly, through a function the model is passed to, or through a loss wrapper: a function or
loss class of another file that hands its argument to the loss, ``_wrappers``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from rgt.lint._join_base import Site, callee, lookup_class, show, shown_file
from rgt.lint._project import Project, Summary
from rgt.lint.losses import WHOLE

LOSS_CODES = {
    "ce": ("RGT101", "softmax"),
    "nll": ("RGT102", "softmax"),
    "bce": ("RGT103", "sigmoid"),
}


def sites(project: Project, path: str, summary: Summary) -> Iterator[Site]:
    yield from _model_losses(project, path, summary)
    yield from _passed_models(project, path, summary)
    yield from _wrapped(project, path, summary)
    yield from _kept(project, path, summary)


def _model_losses(project: Project, path: str, summary: Summary) -> Iterator[Site]:
    for line, col, kind, spelled, position, *held in summary.get("model_losses", ()):
        code, output = LOSS_CODES[kind]
        found = lookup_class(project, path, spelled)
        if not found:
            continue
        found = _through(project, path, found, held[0] if held else [])
        where, name, entry = found
        at = show(where, entry["line"], path)
        if position == WHOLE and entry.get("probs") == output:
            detail = f"`{name}.forward` ({at}) ends in {output}; this loss is applied to its output"
            yield path, line, col, code, detail
        elif position != WHOLE and position in entry.get("probs_at", {}).get(output, ()):
            detail = (f"`{name}.forward` ({at}) returns {output} output as part {position} of a "
                      f"tuple; this loss is applied to that part")  # fmt: skip
            yield path, line, col, code, detail


def _passed_models(project: Project, path: str, summary: Summary) -> Iterator[Site]:
    for line, _col, ref, index, keyword, spelled in summary.get("passes", ()):
        target = callee(project, path, ref)
        found = lookup_class(project, path, spelled) if target else None
        if target is None or found is None or "probs" not in found[2]:
            continue
        where, qual = target
        for position, name, loss_line, loss_col, kind in (
            project.summaries.get(where, {}).get("loss_params", {}).get(qual, ())
        ):
            code, output = LOSS_CODES[kind]
            if (position == index or name == keyword) and found[2]["probs"] == output:
                model = show(found[0], found[2]["line"], where)
                detail = (f"`{found[1]}.forward` ({model}) ends in "
                          f"{output}; {show(path, line, where)} passes that model to `{qual}` as "
                          f"`{name}`, whose output reaches this loss")  # fmt: skip
                yield where, loss_line, loss_col, code, detail


def _wrapped(project: Project, path: str, summary: Summary) -> Iterator[Site]:
    """A call of another file's loss wrapper (``_wrappers``) with probabilities: made here, or
    the output of a model whose ``forward`` (in a third file, perhaps) ends in them."""
    for line, col, spelled, instance, args in summary.get("wrapper_calls", ()):
        target = project.lookup(path, spelled)
        if target is None or target[0] == path:
            continue
        where, name = target
        key = f"class:{name}" if instance else name
        entries = project.summaries.get(where, {}).get("loss_wrappers", {}).get(key, ())
        for position, param, kind, loss_line in entries:
            code, output = LOSS_CODES[kind]
            wrapper = f"`{name}` ({show(where, loss_line, path)}) hands its `{param}` to the loss"
            for index, made, cls, part in args:
                said = (
                    _probabilities(project, path, made, cls, part, output)
                    if index == position
                    else None
                )
                if said:
                    yield path, line, col, code, f"{said}; {wrapper}"
                    break


def _probabilities(
    project: Project, path: str, made: str | None, cls: str | None, part: int, output: str
) -> str | None:
    """What makes an argument ``output`` probabilities, in words (None: it is not)."""
    if made is not None:
        return f"this argument is {output} output" if made == output else None
    found = lookup_class(project, path, cls) if cls else None
    if found is None:
        return None
    where, name, entry = found
    at = show(where, entry["line"], path)
    if part == WHOLE and entry.get("probs") == output:
        return f"`{name}.forward` ({at}) ends in {output}"
    if part != WHOLE and part in entry.get("probs_at", {}).get(output, ()):
        return f"`{name}.forward` ({at}) returns {output} output as part {part} of a tuple"
    return None


def _kept(project: Project, path: str, summary: Summary) -> Iterator[Site]:
    """A loss handed, every step, to a method of a file within two imports that adds it to a
    total on ``self`` (SSA-SC's ``update_train_losses``): RGT204 at the call."""
    calls = summary.get("kept_calls", ())
    near = project.neighbours(path) if calls else []
    for line, col, name, index in calls:
        for other in near:
            if index in project.summaries.get(other, {}).get("accumulators", {}).get(name, ()):
                detail = (f"`{name}` ({shown_file(other, path)}) adds this argument to a "
                          "total it keeps")  # fmt: skip
                yield path, line, col, "RGT204", detail
                break


def _through(
    project: Project, path: str, found: tuple[str, str, dict[str, Any]], held: list[str | None]
) -> tuple[str, str, dict[str, Any]]:
    """A wrapper model whose ``forward`` returns what a module handed to its constructor
    returns (``_flow._returns_param``): that module's class, when the call built it from one."""
    index = found[2].get("returns_param")
    if index is None or index >= len(held) or held[index] is None:
        return found
    inner = lookup_class(project, path, held[index])  # type: ignore[arg-type]
    return inner if inner is not None else found
