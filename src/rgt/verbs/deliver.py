"""``rgt deliver``: which delivery workspace a command works in."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rgt.deliver.workspace import Workspace


def workspace(given: Path | None, near: Path | None = None) -> Workspace:
    """The workspace named (``--workspace``), else the nearest from the current directory up,
    else the nearest from ``near`` (the path ``reconcile`` scans)."""
    from rgt.deliver.workspace import find_workspace
    from rgt.errors import UsageError

    if given is not None:
        return find_workspace(given)
    try:
        return find_workspace(Path.cwd())
    except UsageError:
        if near is None:
            raise
        return find_workspace(near)
