"""Cross-file findings about what goes into a loss (``RGT101``-``RGT103``): a model whose
``forward`` ends in softmax/sigmoid, defined in one file, whose output reaches a loss in another
(directly, through a function the model is passed to, or through a loss wrapper: a function or
loss class of another file that hands its argument to the loss, ``_wrappers``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from rgt.lint._join_base import Site, _last, callee, lookup_class, reach, show, shown_file, through
from rgt.lint._kept_steps import holds
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
    uses = [*summary.get("model_losses", ()), *summary.get("built_losses", ())]
    for line, col, kind, spelled, position, *held in uses:
        built = _built_kind(project, path, kind[4:]) if kind.startswith("via:") else None
        kind, said = built if built is not None else (kind, "")
        found = lookup_class(project, path, spelled) if kind in LOSS_CODES else None
        if not found:
            continue
        code, output = LOSS_CODES[kind]
        found = _held(project, _through(project, path, found, held[0] if held else []))
        where, name, entry = found
        at = show(where, entry["line"], path)
        if position == WHOLE and entry.get("probs") == output:
            detail = (f"`{name}.forward` ({at}) ends in {output}; this loss{said} is applied to "
                      "its output")  # fmt: skip
            yield path, line, col, code, detail
        elif position != WHOLE and position in entry.get("probs_at", {}).get(output, ()):
            detail = (f"`{name}.forward` ({at}) returns {output} output as part {position} of a "
                      f"tuple; this loss{said} is applied to that part")  # fmt: skip
            yield path, line, col, code, detail


def _built_kind(project: Project, path: str, builder: str) -> tuple[str, str] | None:
    """The kind of loss a builder of another file returns (``_flow_losses.loss_factories``),
    a method looked for in the bases of its class too, and how to say so."""
    target = callee(project, path, builder)
    for where, qual in [target, *_inherited(project, target)] if target else ():
        kind = project.summaries.get(where, {}).get("loss_factories", {}).get(qual)
        if kind is not None:
            return kind, f", built by `{qual}` ({shown_file(where, path)}),"
    return None


def _inherited(project: Project, target: tuple[str, str], depth: int = 0) -> list[tuple[str, str]]:
    """``Base.method`` for each base class (3 levels up) of the class of ``Class.method``."""
    where, qual = target
    cls, _, name = qual.rpartition(".")
    entry = project.summaries.get(where, {}).get("classes", {}).get(cls, {})
    out = []
    for base in entry.get("bases", ()) if depth < 3 and cls else ():
        found = project.lookup(where, base)
        if found is not None:
            above = (found[0], f"{found[1]}.{name}")
            out += [above, *_inherited(project, above, depth + 1)]
    return out


def _passed_models(project: Project, path: str, summary: Summary) -> Iterator[Site]:
    reached = reach(project, "loss_params") if summary.get("passes") else frozenset()
    for line, _col, ref, index, keyword, spelled in summary.get("passes", ()):
        target = callee(project, path, ref) if _last(ref) in reached else None
        found = lookup_class(project, path, spelled) if target else None
        found = _held(project, found) if found is not None else None
        if target is None or found is None or not {"probs", "probs_at"} & set(found[2]):
            continue
        qual = target[1]
        for position, name, where, entry in through(project, *target, "loss_params"):
            _, _, loss_line, loss_col, kind, *part = entry
            code, output = LOSS_CODES[kind]
            if (position == index or name == keyword) and _gives(found[2], output, part):
                model = show(found[0], found[2]["line"], where)
                ends = f"returns {output} as part {part[0]}" if part else f"ends in {output}"
                detail = (f"`{found[1]}.forward` ({model}) {ends}; "
                          f"{show(path, line, where)} passes that model to `{qual}` as "
                          f"`{name}`, whose output reaches this loss")  # fmt: skip
                yield where, loss_line, loss_col, code, detail


def _gives(entry: dict[str, Any], output: str, part: list[int]) -> bool:
    """Does a model's ``forward`` (its class's summary) return ``output`` whole, or at the
    tuple position ``part`` names (``[]``: the whole output)?"""
    if not part:
        return entry.get("probs") == output
    return part[0] in entry.get("probs_at", {}).get(output, ())


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
    where, name, entry = _held(project, found)
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
    sites = summary.get("step_sites", ())
    near = project.neighbours(path) if sites else []
    for line, col, name, total, position in sites:
        for other in near:
            offered = project.summaries.get(other, {}).get("loss_steps", {})
            if name in offered and holds(position, offered[name]):
                detail = (f"`{total}` keeps what `{name}` ({shown_file(other, path)}) returns "
                          "after its backward pass: the loss, graph and all")  # fmt: skip
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


def _held(
    project: Project, found: tuple[str, str, dict[str, Any]], depth: int = 0
) -> tuple[str, str, dict[str, Any]]:
    """A model whose ``forward`` returns the output of a module it builds from a class of the
    project (``_flow_kept.returns_held``), or that inherits its ``forward`` from a base class
    of the project: that class, 3 levels down."""
    spelled = found[2].get("returns_held")
    if found[2].get("inherits_forward") and "probs" not in found[2]:
        spelled = found[2].get("bases", [None])[0]  # the first base's ``forward`` runs
    inner = lookup_class(project, found[0], spelled) if spelled and depth < 3 else None
    return found if inner is None else _held(project, inner, depth + 1)
