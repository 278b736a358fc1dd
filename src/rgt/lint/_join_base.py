"""What the cross-file joins share (``_join``, ``_join_losses``): where a class or a call's
target is defined, and how a place in another file is shown in a finding."""

from __future__ import annotations

import os
from typing import Any

from rgt.lint._project import Project
from rgt.lint._source import project_root

Site = tuple[str, int, int, str, str]  # path, line, col, code, detail


def show(path: str, line: int, near: str) -> str:
    """``utils/datasets.py:22``: a path as seen from the project's root."""
    root = project_root(os.path.dirname(os.path.abspath(near)))
    full = os.path.abspath(path)
    if not full.startswith(root + os.sep):  # no project marker: from the folder they share
        root = os.path.commonpath([os.path.dirname(full), os.path.dirname(os.path.abspath(near))])
    shown = os.path.relpath(full, root)
    return f"{shown}:{line}"


def lookup_class(
    project: Project, path: str, spelled: str, depth: int = 0
) -> tuple[str, str, dict[str, Any]] | None:
    """The class an object spelled ``spelled`` in ``path`` is an instance of: the class
    itself, or what a factory function of the project returns (``build_dataset(cfg)``
    returning ``DepthContrastDataset(cfg)``: ``_flow_make.factories``), followed through
    factories that call factories, 3 deep; the first of a factory's choices that is one."""
    found = project.lookup(path, spelled)
    if found is None:
        return None
    where, name = found
    summary = project.summaries.get(where, {})
    entry = summary.get("classes", {}).get(name)
    if entry is not None:
        return where, name, entry
    factory = summary.get("factories", {}).get(name)
    for made in factory[1] if factory is not None and depth < 3 else ():
        inner = lookup_class(project, where, made, depth + 1)
        if inner is not None:
            return inner
    return None


def callee(project: Project, path: str, ref: str) -> tuple[str, str] | None:
    """A call's target as (file, qualified name there): ``name:train.source_only``,
    ``local:Trainer.train_step``, ``class:SupervisedTrainer:train``."""
    kind, _, rest = ref.partition(":")
    if kind == "local":
        return path, rest
    if kind == "class":
        cls, _, name = rest.partition(":")
        found = project.lookup(path, cls)
        return (found[0], f"{found[1]}.{name}") if found else None
    return project.lookup(path, rest)


DEEP = 2  # hand-overs followed from the first callee (``through``)


def through(
    project: Project, path: str, qual: str, key: str, depth: int = 0
) -> list[tuple[int, str, str, list[Any]]]:
    """What ``qual`` in ``path`` does with its parameters, by a summary's ``key``
    (``loader_params``, ``loss_params``: ``qual -> [[position, name, ...]]``): its own entries,
    and those of the functions it hands a parameter on to (``forwards``), ``DEEP`` calls
    deep across files: ``(position, name, file of the entry, entry)``."""
    summary = project.summaries.get(path, {})
    out = [(e[0], e[1], path, e) for e in summary.get(key, {}).get(qual, ())]
    for position, name, ref, index, word in (
        summary.get("forwards", {}).get(qual, ()) if depth < DEEP else ()
    ):
        target = callee(project, path, ref)
        if target is None or target == (path, qual):
            continue
        for at, param, where, entry in through(project, *target, key, depth + 1):
            if at == index or (word is not None and param == word):
                out.append((position, name, where, entry))
    return out


def reach(project: Project, key: str) -> frozenset[str]:
    """The last names of the functions ``through`` can find an entry of ``key`` from: those
    with one, and those that hand a parameter on to one of them (``DEEP`` rounds). A call
    whose callee's name is not among them is not looked up (most calls: a cheap test)."""
    memo = project.reached
    if key not in memo:
        names = {q.rpartition(".")[2] for s in project.summaries.values() for q in s.get(key, {})}
        hands = [(q, e[2]) for s in project.summaries.values()
                 for q, es in s.get("forwards", {}).items() for e in es]  # fmt: skip
        for _ in range(DEEP):
            names |= {q.rpartition(".")[2] for q, ref in hands if _last(ref) in names}
        memo[key] = frozenset(names)
    return memo[key]


def _last(ref: str) -> str:
    """The name a call reference (``_flow_data.ref``) ends with: ``class:Trainer:fit`` is
    ``fit``, ``name:engine.train`` is ``train``; a class called (``name:Trainer``) is its
    ``__init__``'s entries, keyed by the class's name."""
    return ref.rpartition(":")[2].rpartition(".")[2]


def shown_file(path: str, near: str) -> str:
    """``models/base_model.py``: a file as seen from the project's root (``show`` without the
    line)."""
    return show(path, 0, near).rpartition(":")[0]
