"""Cross-file findings about the order of an update (``RGT106``): a loop that calls, on one
object, a method that steps a learning-rate scheduler before a method that steps an optimizer,
both defined in the project (``_flow_order``)."""

from __future__ import annotations

from collections.abc import Iterator

from rgt.lint._join_base import Site, callee, show, shown_file, through
from rgt.lint._project import Project, Summary


def sites(
    project: Project, path: str, summary: Summary, stepping: dict[str, str]
) -> Iterator[Site]:
    """``stepping``: the project's optimizer-stepping methods, each with a file that has one."""
    yield from _handed(project, path, summary)
    orders = summary.get("method_orders", ())
    if not orders:
        return
    near = [path, *project.neighbours(path)]
    scheduling = {
        name: other
        for other in near
        for name in project.summaries.get(other, {}).get("sched_methods", ())
    }
    for owner, calls in orders:
        first = next((i for i, c in enumerate(calls) if c[0] in scheduling), None)
        if first is None:
            continue
        later = [c for c in calls[first + 1 :] if c[0] in stepping and c[0] not in scheduling]
        if later:
            name, line, col = calls[first]
            defined = shown_file(scheduling[name], path)
            stepped = shown_file(stepping[later[0][0]], path)
            detail = (f"`{owner}.{name}()` steps a learning-rate scheduler ({defined}) "
                      f"before `{owner}.{later[0][0]}()` steps the optimizer ({stepped}) "
                      "in this loop")  # fmt: skip
            yield path, line, col, "RGT106", detail


def stepping_methods(project: Project) -> dict[str, str]:
    """Every optimizer-stepping method the project defines, by name."""
    return {
        name: path
        for path, summary in project.summaries.items()
        for name in summary.get("opt_methods", ())
    }


def _handed(project: Project, path: str, summary: Summary) -> Iterator[Site]:
    """A scheduler stepped (here, or by a function it is handed to) before a call that hands
    the optimizer to a function (of another file, perhaps two calls deep:
    ``_join_base.through``) that steps it."""
    for line, col, ref, index, word, name, how in summary.get("sched_calls", ()):
        stepped = _steps(project, path, ref, index, word, "opt_params")
        first = _steps(project, path, how[0], how[1], how[2], "sched_params") if how else ("", "")
        if stepped is None or first is None:
            continue
        by = f" (by `{first[0]}`, {first[1]})" if how else ""
        detail = (f"the scheduler steps here{by} before `{stepped[0]}` steps `{name}` "
                  f"({stepped[1]}) in this loop")  # fmt: skip
        yield path, line, col, "RGT106", detail


def _steps(
    project: Project, path: str, ref: str, index: int, word: str | None, key: str
) -> tuple[str, str] | None:
    """The function a call hands an object to, and where it (or one it hands it on to) steps
    it: ``(name, file:line)``; None if none does."""
    target = callee(project, path, ref)
    for position, param, where, entry in through(project, *target, key) if target else ():
        if position == index or (word is not None and param == word):
            return target[1], show(where, entry[2], path)  # type: ignore[index]
    return None
