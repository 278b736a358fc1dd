"""Cross-file findings about the random state a DataLoader's workers share (``RGT305``).

A Dataset defined in one module draws random augmentations; a DataLoader with workers and no
``worker_init_fn`` is built over it in another. The Dataset is reached from the loader however
the project wires it: built right there from the class, built by a factory function
(``build_dataset(cfg)`` returning ``DepthContrastDataset(cfg)``), or handed by a caller to a
function whose parameter the loader reads (``get_loader(dataset=dataset)``). Its draws are
followed into its bases, into the objects it keeps, and into the project's functions its item
code calls (``get_transform3d`` drawing from ``np.random``: ``_flow_make.draws``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

from rgt.lint._join_base import Site, _last, callee, lookup_class, reach, show, through
from rgt.lint._project import Project, Summary, old_torch


def sites(project: Project, path: str, summary: Summary) -> Iterator[Site]:
    uses = [*summary.get("loaders", ()), *summary.get("loaders_made", ())]
    for line, col, spelled, workers, *via in uses:
        yield from _worker_rng(project, path, (line, col, workers), spelled, via, "")
        found = None if via else lookup_class(project, path, spelled)
        if found is not None and found[0] != path and found[2].get("unsharded"):
            at = show(found[0], found[2]["line"], path)
            detail = (f"IterableDataset `{found[1]}` ({at}) never asks which worker runs it; the "
                      f"DataLoader here has {workers} workers: each yields every item")  # fmt: skip
            yield path, line, col, "RGT303", detail
    reached = reach(project, "loader_params") if summary.get("handed") else frozenset()
    for line, _col, ref, index, keyword, spelled in summary.get("handed", ()):
        target = callee(project, path, ref) if _last(ref) in reached else None
        if target is None:
            continue
        for position, name, where, entry in through(project, *target, "loader_params"):
            _, _, at, col, workers = entry
            qual = target[1]
            if position == index or name == keyword:
                how = f", handed to `{qual}` as `{name}` at {show(path, line, where)},"
                yield from _worker_rng(project, where, (at, col, workers), spelled, [], how, path)


def _worker_rng(
    project: Project,
    path: str,
    loader: tuple[int, int, str],
    spelled: str,
    via: list[Any],
    how: str,
    spelled_in: str = "",
) -> Iterator[Site]:
    """RGT305 at the loader (``path``, ``loader``: line, col, workers as written) over an
    object of ``spelled`` (as spelled in ``spelled_in``, the loader's file by default)."""
    line, col, workers = loader
    found = _dataset(project, spelled_in or path, spelled)
    if found is None:
        return
    where, name, rng = found
    defined = project.summaries[where]["classes"][name]["line"]
    kind = "Transform" if via else "Dataset"  # a transform the loader's Dataset applies
    head = f"{kind} `{name}` ({show(where, defined, path)}){how}"
    tail = f"; the DataLoader here has {workers} workers and no worker_init_fn"
    shared = sorted(set(rng["made"]) & rng["used"])
    if shared:
        attr = shared[0]
        src, made_line, what = rng["made"][attr]
        detail = (f"{head} draws from `self.{attr}`, {what} made once in __init__ "
                  f"({show(src, made_line, path)}) and copied into every worker{tail}")  # fmt: skip
        yield path, line, col, "RGT305", detail
    elif rng["global"] and not project.anywhere("spawns"):
        pin = old_torch(os.path.dirname(os.path.abspath(path)))
        src, draw_line, draw, cls = rng["global"]
        if pin:
            detail = (f"{head} draws from NumPy's global RNG ({draw} in `{cls}`, "
                      f"{show(src, draw_line, path)}) and {pin} keeps torch below 1.9, whose "
                      f"workers do not reseed NumPy{tail}")  # fmt: skip
            yield path, line, col, "RGT305", detail


def _dataset(project: Project, path: str, spelled: str) -> tuple[str, str, dict[str, Any]] | None:
    """The class's RNG facts merged over its bases (defined here or imported), 3 levels."""
    found = lookup_class(project, path, spelled)
    if found is None:
        return None
    merged: dict[str, Any] = {"made": {}, "used": set(), "global": None, "where": {}}
    todo, depth = [found], 0
    while todo and depth < 8:
        where, name, entry = todo.pop(0)
        depth += 1
        for attr, what in entry.get("made", {}).items():
            merged["made"].setdefault(attr, [where, *what])
        for attr, (line, spelled) in entry.get("holds", {}).items():
            held = _held_rng(project, where, spelled) if attr not in merged["made"] else None
            if held is not None:
                merged["made"][attr] = [where, line, held]
        merged["used"] |= set(entry.get("used", ()))
        if entry.get("global") and merged["global"] is None:
            merged["global"] = [where, *entry["global"], name]
        if merged["global"] is None:
            merged["global"] = _helper_draw(project, where, name)
        if merged["global"] is None:
            merged["global"] = _held_draw(project, where, entry, 0)
        for base in entry.get("bases", ()):
            more = lookup_class(project, where, base)
            if more is not None:
                todo.append(more)
    return found[0], found[1], merged


def _helper_draw(project: Project, where: str, name: str) -> list[Any] | None:
    """The first draw from NumPy's global RNG in a function of the project that the class's
    item code calls (``_flow_make.item_helpers``): ``[file, line, draw, what]``."""
    for spelled in project.summaries.get(where, {}).get("item_helpers", {}).get(name, ()):
        target = project.lookup(where, spelled)
        if target is None:
            continue
        draw = project.summaries.get(target[0], {}).get("draws", {}).get(target[1])
        if draw is not None:
            return [target[0], draw[0], draw[1], f"{target[1]}`, called by `{name}"]
    return None


def _held_rng(project: Project, path: str, spelled: str) -> str | None:
    """An object's class (or a base of it) that makes an RNG in ``__init__``: what to say."""
    found = lookup_class(project, path, spelled)
    todo, depth = [found] if found else [], 0
    while todo and depth < 6:
        where, _name, entry = todo.pop(0)
        depth += 1
        for attr, (line, what) in entry.get("made", {}).items():
            shown = show(where, line, path)
            return f"a `{found[1]}` whose `self.{attr}` is {what} ({shown})"  # type: ignore[index]
        todo += [c for c in (lookup_class(project, where, b) for b in entry.get("bases", ())) if c]
    return None


def _held_draw(project: Project, where: str, entry: dict[str, Any], depth: int) -> list[Any] | None:
    """The first draw from NumPy's global RNG by an object the class keeps and uses (``self.
    augment``), or by one listed where that object is built (``Compose([RandomFlip(), ...])``),
    two holders deep: ``[file, line, draw, class]``."""
    used = set(entry.get("used", ()))
    parts = entry.get("parts", {})
    for attr, (_line, spelled) in entry.get("holds", {}).items():
        if attr not in used or depth > 1:
            continue
        for name in [spelled, *parts.get(attr, ())]:
            found = lookup_class(project, where, name)
            if found is None:
                continue
            if found[2].get("global"):
                return [found[0], *found[2]["global"], found[1]]
            deeper = _held_draw(project, found[0], found[2], depth + 1)
            if deeper is not None:
                return deeper
    return None
