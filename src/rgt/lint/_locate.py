"""Where a script's imports lead: its local modules, its project's package, ``src/`` layouts
and folders it puts on ``sys.path``, read from its import lines before anything is parsed.

Folder listings and answers are remembered within one run (``forget_folders`` at its start):
a repository's scripts share a few folders and import the same names.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from functools import lru_cache

TYPE_CHECKING = False
if TYPE_CHECKING:
    from rgt.lint._source import Text

PROJECT_MARKERS = frozenset({".git", "pyproject.toml", "setup.py", "setup.cfg"})
MAX_CLIMB = 8  # folders looked at for a project's root, the file's own included


def normal(raw: str) -> str:
    """A path as ``pathlib`` spells it (``./a//b/`` is ``a/b``; ``..`` kept), without importing
    pathlib (~3 ms of every run's start). Paths are shown as spelled here."""
    if os.sep != "/":  # pragma: no cover - Windows: its own rules
        from pathlib import Path

        return str(Path(raw))
    head = "/" if raw.startswith("/") else ""
    if raw.startswith("//") and not raw.startswith("///"):
        head = "//"  # POSIX leaves a path's two leading slashes to the system
    return head + "/".join(p for p in raw.split("/") if p not in ("", ".")) or "."


IMPORT = re.compile(r"^[ \t]*(?:from[ \t]+(\.?[\w.]+)[ \t]+import|import[ \t]+([\w., \t]+))", re.M)


def local_imports(text: Text) -> list[str]:
    """The modules a script links to (``_imports``' first part)."""
    return _imports(text)[0]


def _imports(text: Text, tops: tuple[str, ...] = ()) -> tuple[list[str], list[str]]:
    """Modules next to a script that it imports (``import data``, ``from models import Net``),
    and modules of its own project imported by their full name from elsewhere in the tree
    (``from detectron2.engine import ...`` in ``tools/train_net.py``: looked for from the
    project's root, ``project_root``), found by reading the import lines (before anything is
    parsed); then the modules found only in the root's ``src/`` or a folder the script puts on
    ``sys.path``: read for the rules that follow objects across files (``_join``), but not
    linked for the project words (a library in ``src/`` lends the script no GPU). In a
    project without a marker, a module is also looked for in the folders above the script,
    up to the folder named to lint (``tops``): its top, where the scripts are run from
    (openscene's ``run/distill.py`` imports ``models.disnet``)."""
    here = _script_folder(text.path)
    names: dict[str, bool] = {}  # name → imported relatively (``from .data import``)
    for match in _import_lines(text.text):
        module = match.group(1)
        if module:
            names[module.lstrip(".")] = module.startswith(".")
            continue
        for part in match.group(2).split(","):
            names[part.split(" as ")[0].strip()] = False
    extra = tuple(_sys_path_folders(text.text, here)) if "sys.path" in text.text else ()
    found, also = [], []
    for name, relative in sorted((n, r) for n, r in names.items() if n):
        module, more = _resolve(here, name, relative, extra, tops)
        if more is not None:
            also.append(more)
        if module is not None:
            found.append(module)
    return found, also


@lru_cache(maxsize=8192)  # a folder's scripts import the same names
def _resolve(
    here: str, name: str, relative: bool, extra: tuple[str, ...], tops: tuple[str, ...]
) -> tuple[str | None, str | None]:
    """Where ``import name`` from a script in ``here`` leads: the module linked (or None), and
    the module only read (or None), in the root's ``src/`` or a folder put on ``sys.path``."""
    module = _module(here, name)
    if module is not None or relative:
        return module, None
    root = project_root(here)
    module = _module(root, name) if root != here else None
    if module is None:
        for folder in (os.path.join(root, "src"), *extra):
            more = _module(folder, name)
            if more is not None:
                return _above(here, name, tops) if tops and root == here else None, more
    if module is None and tops and root == here:
        module = _above(here, name, tops)
    return module, None


def _above(here: str, name: str, tops: tuple[str, ...]) -> str | None:
    """``name`` found in a folder above ``here``, within the deepest of ``tops`` (absolute
    folders) that holds ``here``."""
    head = name.split(".")[0]
    for folder in _folders_above(here, tops):
        entries = _listing(folder)
        if head in entries or f"{head}.py" in entries:
            module = _module(folder, name)
            if module is not None:
                return module
    return None


@lru_cache(maxsize=1024)  # a folder's scripts climb the same folders
def _folders_above(here: str, tops: tuple[str, ...]) -> tuple[str, ...]:
    full = os.path.abspath(here)
    within = [t for t in tops if full.startswith(t + os.sep)]
    if not within:
        return ()
    top, folder, found = max(within, key=len), here, []
    for _ in range(MAX_CLIMB):
        folder = os.path.normpath(os.path.join(folder, os.pardir))
        if not (os.path.abspath(folder) + os.sep).startswith(top + os.sep):
            break
        found.append(folder)
    return tuple(found)


SYS_PATH = re.compile(r"sys\.path\.(?:insert|append)\(([^\n]*)\)")
QUOTED = re.compile(r"[\"']([^\"'\n]+)[\"']")


def _sys_path_folders(code: str, here: str) -> list[str]:
    """Folders a script adds to ``sys.path`` (``sys.path.insert(0, "lib")``,
    ``os.path.join(os.path.dirname(__file__), "..")``): the last quoted part of the call,
    taken relative to the script's folder (a ``src/`` layout: the project's root + ``src``)."""
    found = []
    for match in SYS_PATH.finditer(code):
        parts = QUOTED.findall(match.group(1))
        if parts:
            found.append(os.path.normpath(os.path.join(here, parts[-1])))
    return found


def forget_folders() -> None:
    """Forget what was seen of folders (a new run sees them as they are now)."""
    _listing.cache_clear()
    _module.cache_clear()
    _resolve.cache_clear()
    _folders_above.cache_clear()
    project_root.cache_clear()


def _script_folder(path: str) -> str:
    """Where Python looks for a script's own imports: the folder of the file a link points to,
    as ``python link.py`` does (sys.path[0]), else the file's folder as named."""
    if os.path.islink(path):
        return os.path.dirname(os.path.realpath(path))
    return os.path.dirname(path) or "."


@lru_cache(maxsize=4096)  # a folder's scripts import the same names
def _module(folder: str, name: str) -> str | None:
    """``name`` (dotted) as a module file or package under ``folder``, if there is one."""
    *folders, last = name.split(".")
    where = os.path.join(folder, *folders)
    entries = _listing(where)
    if f"{last}.py" in entries and os.path.isfile(found := os.path.join(where, f"{last}.py")):
        return normal(found)
    if last in entries and os.path.isfile(found := os.path.join(where, last, "__init__.py")):
        return normal(found)
    return None


@lru_cache(maxsize=1024)
def project_root(folder: str) -> str:
    """The nearest folder at or above ``folder`` that holds a project's marker (``.git``,
    ``pyproject.toml``, ``setup.py``, ``setup.cfg``): where a script's imports of its own
    package resolve when it runs (the package installed in development mode, or the script
    started from the root). ``folder`` itself when none is found within ``MAX_CLIMB``."""
    here = folder
    for _ in range(MAX_CLIMB):
        if _listing(here) & PROJECT_MARKERS:
            return here
        parent = os.path.normpath(os.path.join(here, os.pardir))
        if os.path.abspath(parent) == os.path.abspath(here):
            break
        here = parent
    return folder


def _import_lines(code: str) -> Iterator[re.Match[str]]:
    """``IMPORT`` matched at the start of each line that says "import" (a scan of every line
    start with the regex costs more than the rest of reading a file)."""
    at = code.find("import")
    while at != -1:
        start = code.rfind("\n", 0, at) + 1
        match = IMPORT.match(code, start)
        if match is not None:
            yield match
        end = code.find("\n", at)
        at = -1 if end == -1 else code.find("import", end)


@lru_cache(maxsize=4096)
def _listing(folder: str) -> frozenset[str]:
    """A folder's names, read once per run (a tree's scripts share a few folders)."""
    try:
        return frozenset(os.listdir(folder))
    except OSError:
        return frozenset()
