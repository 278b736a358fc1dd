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
    project: Project, path: str, spelled: str
) -> tuple[str, str, dict[str, Any]] | None:
    found = project.lookup(path, spelled)
    if found is None:
        return None
    where, name = found
    entry = project.summaries.get(where, {}).get("classes", {}).get(name)
    return (where, name, entry) if entry is not None else None


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


def shown_file(path: str, near: str) -> str:
    """``models/base_model.py``: a file as seen from the project's root (``show`` without the
    line)."""
    return show(path, 0, near).rpartition(":")[0]
