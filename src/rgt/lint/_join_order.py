"""Cross-file findings about the order of an update (``RGT106``): a loop that calls, on one
object, a method that steps a learning-rate scheduler before a method that steps an optimizer,
both defined in the project (``_flow_order``)."""

from __future__ import annotations

from collections.abc import Iterator

from rgt.lint._join_base import Site, shown_file
from rgt.lint._project import Project, Summary


def sites(
    project: Project, path: str, summary: Summary, stepping: dict[str, str]
) -> Iterator[Site]:
    """``stepping``: the project's optimizer-stepping methods, each with a file that has one."""
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
