"""rgt's training-side package for the job: ``import rgt.ckpt`` without installing rgt.

The agent archive carries ``rgt/ckpt`` (``build``). A job gets it through a small
``sitecustomize.py`` in a directory the agent puts on the job's ``PYTHONPATH``: at interpreter
start it appends the archive to the END of ``sys.path``, after site-packages, so an rgt the
user installed into the job's Python (a newer one, or the full package with ``rgt.smoke``) is
the one imported, and the archive only fills in where there is none. The archive as a
``PYTHONPATH`` entry would come before site-packages and shadow it. The directory goes first on
``PYTHONPATH`` (it holds only that file); any other ``sitecustomize`` (the user's ``PYTHONPATH``
entries, the image's: Debian and Ubuntu ship one) still runs: this one runs the next one.

Not reached by ``python -I``/``-S``/``-E`` (no site, no PYTHONPATH): such a job imports what
its interpreter has installed, as it would without rgt.
"""

from __future__ import annotations

import os
from typing import Dict, Optional

from rgt import _fs
from rgt.agent import _runtime_hook

DIRNAME = "pythonpath"
SITE = """# Written by the rgt agent (rgt.agent._pypath): rgt's training-side package (rgt.ckpt)
# from the agent archive, LAST on sys.path, so an rgt installed in this Python is imported.
import sys

ARCHIVE = %r
if ARCHIVE not in sys.path:
    sys.path.append(ARCHIVE)


def _next_sitecustomize():
    import importlib.machinery
    import importlib.util
    import os

    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here and p != ARCHIVE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        spec.loader.exec_module(importlib.util.module_from_spec(spec))


_next_sitecustomize()
"""


def archive() -> Optional[str]:
    """The agent archive this process runs from (None when run from a source tree)."""
    import rgt

    where = os.path.dirname(os.path.dirname(os.path.abspath(rgt.__file__)))
    return where if os.path.isfile(where) else None


def add_to(env: Dict[str, str], job_root: str) -> Optional[str]:
    """Put the sitecustomize directory first on ``env``'s PYTHONPATH (it holds nothing else,
    so it shadows no module; a sitecustomize of the user's entries runs after it); the
    directory, or None when there is no archive to offer."""
    pyz = archive()
    if pyz is None:
        return None
    directory = os.path.join(job_root, DIRNAME)
    try:
        os.makedirs(directory, exist_ok=True)
        _fs.atomic_write_bytes(
            os.path.join(directory, "sitecustomize.py"), (SITE % pyz + _runtime_hook.HOOK).encode()
        )
    except OSError:  # a job that never imports rgt.ckpt must not fail for this
        return None
    before = env.get("PYTHONPATH", "")
    env["PYTHONPATH"] = directory + os.pathsep + before if before else directory
    return directory
