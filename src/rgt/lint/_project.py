"""A project's own imports, resolved the way Python would find them when the script runs.

An import is looked for relative to the importing file (``from ..utils import x``: its level),
beside the script, at the project's root (the nearest folder with ``.git``,
``pyproject.toml``, ``setup.py`` or ``setup.cfg``) and its ``src/`` (a ``src`` layout), in the
folders a script puts on ``sys.path`` (``sys.path.insert(0, "lib")``, ``_init_paths.py``), and
in the folders above the script (a repository without a marker, run from its top). Names are
followed through packages that re-export them (``from .dual_encoder import DualEncoder`` in an
``__init__.py``), a few steps at most.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

from rgt.lint._source import MAX_CLIMB, Text, _import_lines, project_root

Summary = dict[str, Any]
MAX_HOPS = 4  # re-exports followed for one name
# The summary keys whose entries are named by what the module defines (``Project._names``).
OWN_NAMES = ("loss_params", "runners", "steppers", "factories", "loader_params", "draws",
             "loss_factories", "modes_left", "opt_methods", "sched_methods")  # fmt: skip
# A torch requirement: ``torch==1.4.0``, ``torch>=1.2,<1.9``, conda's ``pytorch=1.4``.
TORCH_SPEC = re.compile(r"(?im)^[\s\-\"']*(?:py)?torch\s*((?:[<>=~!]=?\s*[\d.]+[\s,]*)+)")
SPEC = re.compile(r"([<>=~!]=?)\s*(\d+)\.(\d+)")
REQUIREMENTS = ("requirements.txt", "requirements", "setup.py", "setup.cfg", "pyproject.toml",
                "environment.yml", "environment.yaml")  # fmt: skip


class Project:
    """The linted files' summaries, and how their imports resolve to one another."""

    def __init__(self, summaries: Mapping[str, Summary], paths: Iterable[str] = ()) -> None:
        """``paths``: every linted file, summarised or not (a model file no rule parses is
        still where an import leads: ``neighbours``)."""
        self.summaries = summaries
        self.by_abs = {os.path.abspath(p): p for p in [*paths, *summaries]}
        self.extra = sorted({p for s in summaries.values() for p in s.get("paths", ())})
        self._modules: dict[tuple[str, str, int], str | None] = {}
        self._anywhere: dict[str, bool] = {}
        self._below: dict[str, set[str]] | None = None  # ``_entries``
        self._heres: dict[str, str] = {}  # importer → its folder, absolute
        self._where: dict[str, tuple[str, ...]] = {}  # folder → ``_folders``
        self.reached: dict[str, frozenset[str]] = {}  # ``_join_base.reach``, by summary key

    def anywhere(self, key: str) -> bool:
        """Does any file's summary say ``key`` (``spawns``: a start method set)? Asked once."""
        if key not in self._anywhere:
            self._anywhere[key] = any(s.get(key) for s in self.summaries.values())
        return self._anywhere[key]

    def module(self, importer: str, name: str, level: int = 0) -> str | None:
        """The linted file that ``import name`` (dots: ``level``) in ``importer`` loads (asked
        once per folder: the files of a folder import the same names)."""
        here = self._heres.get(importer)
        if here is None:
            here = self._heres[importer] = os.path.dirname(os.path.abspath(importer))
        key = (here, name, level)
        if key not in self._modules:
            self._modules[key] = self._module(here, name, level)
        return self._modules[key]

    def _module(self, here: str, name: str, level: int) -> str | None:
        if level:
            for _ in range(level - 1):
                here = os.path.dirname(here)
            return self._find(here, name) if name else self._find(here, "__init__")
        folders = self._where.get(here)
        if folders is None:
            folders = self._where[here] = tuple(self._folders(here))
        return next((f for f in (self._find(d, name) for d in folders) if f), None)

    def _folders(self, here: str) -> Iterable[str]:
        """Where an absolute import is looked for (only folders that hold a linted file or
        lead to one are worth a lookup; a miss costs two dictionary lookups)."""
        root = project_root(here)
        yield from (here, root, os.path.join(root, "src"), *self.extra)
        for _ in range(MAX_CLIMB):
            parent = os.path.dirname(here)
            if parent == here:
                return
            here = parent
            yield here

    def _find(self, folder: str, name: str) -> str | None:
        if not self._may_hold(folder, name.partition(".")[0]):
            return None
        base = os.path.join(folder, *name.split("."))
        return self.by_abs.get(base + ".py") or self.by_abs.get(os.path.join(base, "__init__.py"))

    def _may_hold(self, folder: str, head: str) -> bool:
        """False only where ``folder/head...`` can be no linted file: ``head`` leads to none
        from ``folder`` (a folder spelled with a trailing slash is looked up as before)."""
        if not (head and folder) or "/" in head or folder[-1] == "/":
            return True
        return head in self._entries().get(folder, ())

    def _entries(self) -> dict[str, set[str]]:
        """Each folder above a linted file → the names in it that lead to one (``x`` for
        ``x.py`` or a folder ``x``): most imports (``torch``, ``numpy``) lead to none, and a
        miss is then one lookup, not two joined paths per folder looked in."""
        if self._below is None:
            self._below = {}
            for path in self.by_abs:
                name, folder = os.path.basename(path), os.path.dirname(path)
                name = name[:-3] if name.endswith(".py") else name
                while folder and name:
                    self._below.setdefault(folder, set()).add(name)
                    name, parent = os.path.basename(folder), os.path.dirname(folder)
                    if parent == folder:
                        break
                    folder = parent
        return self._below

    def lookup(self, importer: str, spelled: str, hops: int = 0) -> tuple[str, str] | None:
        """Where the object spelled ``spelled`` in ``importer`` is defined: (file, name in it).
        ``model.Classifier`` after ``import model``, ``DualEncoder`` after ``from
        noesis.networks import DualEncoder`` (re-exported there), a class of ``importer``."""
        summary = self.summaries.get(importer)
        if summary is None or hops > MAX_HOPS:
            return None
        head, _, rest = spelled.partition(".")
        imports = _imports_of(summary)
        if head in summary.get("classes", {}) or not imports:
            return importer, spelled
        for local, module, level, obj in imports:
            if local != head:
                continue
            if obj is None:  # ``import a.b as m``: ``m.X`` is X in a/b.py (or a/b/X.py...)
                return self._inside(importer, module, level, rest, hops)
            sub = self.module(importer, f"{module}.{obj}" if module else obj, level)
            if sub is not None and rest:
                return self._inside(importer, f"{module}.{obj}".lstrip("."), level, rest, hops)
            found = self.module(importer, module, level)
            if found is not None:
                return self._defined(found, obj + (f".{rest}" if rest else ""), hops + 1)
        for local, module, level, _obj in imports:
            found = self.module(importer, module, level) if local == "*" else None
            if found is None:
                continue
            if head in self._names(found):
                return self._defined(found, spelled, hops + 1)
            deeper = self._defined(found, spelled, hops + 1)  # ``import *`` of an ``import *``
            if deeper is not None and head in self._names(deeper[0], own=True):
                return deeper
        return importer, spelled

    def _inside(
        self, importer: str, module: str, level: int, rest: str, hops: int
    ) -> tuple[str, str] | None:
        parts = rest.split(".")
        for cut in range(len(parts) - 1, -1, -1):  # the longest module path first
            name = ".".join([module, *parts[:cut]]) if module else ".".join(parts[:cut])
            found = self.module(importer, name, level)
            if found is not None and cut < len(parts):
                return self._defined(found, ".".join(parts[cut:]), hops + 1)
        return None

    def _defined(self, path: str, name: str, hops: int) -> tuple[str, str] | None:
        """Where ``name`` of the module ``path`` is defined: there, or where an import of the
        module brings it from (by name, or by ``from .backbones import *``: a package that
        re-exports its subpackages' names)."""
        summary = self.summaries.get(path, {})
        head = name.split(".")[0]
        imports = summary.get("imports", ())
        if head in summary.get("classes", {}):
            return path, name
        if any(i[0] == head for i in imports):
            return self.lookup(path, name, hops)
        if any(i[0] == "*" for i in imports) and head not in self._names(path, own=True):
            return self.lookup(path, name, hops)
        return path, name

    def _names(self, path: str, own: bool = False) -> set[str]:
        """The names a module defines that a summary speaks of (``own``), and those it
        imports."""
        summary = self.summaries.get(path, {})
        names = set(summary.get("classes", {}))
        for key in OWN_NAMES:
            names |= {q.split(".")[0] for q in summary.get(key, {})}
        return names if own else names | {i[0] for i in summary.get("imports", ())}

    def neighbours(self, path: str, hops: int = 2) -> list[str]:
        """Files within ``hops`` imports of ``path``, either way (importers first met first)."""
        graph = self._graph()
        seen, frontier = {path}, [path]
        for _ in range(hops):
            frontier = [n for p in frontier for n in graph.get(p, ()) if n not in seen]
            seen.update(frontier)
        return sorted(seen - {path})

    def _graph(self) -> dict[str, set[str]]:
        if not hasattr(self, "_edges"):
            edges: dict[str, set[str]] = {}
            for path, summary in self.summaries.items():
                lazy = [[None, *entry] for entry in summary.get("lazy_imports", ())]
                for _local, module, level, obj in [*summary.get("imports", ()), *lazy]:
                    found = self.module(path, module, level) if module or level else None
                    if obj and (sub := self.module(path, f"{module}.{obj}".lstrip("."), level)):
                        found = sub
                    if found and found != path:
                        edges.setdefault(path, set()).add(found)
                        edges.setdefault(found, set()).add(path)
            self._edges = edges
        return self._edges


def _imports_of(summary: Summary) -> list[list[Any]]:
    """The module's imports, then those inside its functions (``from models import Net`` in
    ``main()``) as if at module level: a name is looked up in its own function's imports
    first in Python, and a script seldom binds the same name two ways."""
    imports: list[list[Any]] = summary.get("imports", [])
    lazy = summary.get("lazy_imports")
    if not lazy:
        return imports
    more = []
    for module, level, obj in lazy:
        head = module.split(".")[0]
        more.append([obj, module, level, obj] if obj else [head, head, 0, None])
    return imports + [m for m in more if m[0] != "*"]


def linked(texts: list[Text]) -> frozenset[str]:
    """The absolute paths of the texts that import another of them or are imported by one,
    found by reading the import lines: a relative import resolved, an absolute one matched
    against the dotted names the files could be imported by (``models.net`` is any
    ``.../models/net.py``): the files a summary is wanted of even where no rule needs them
    parsed (a model's module, the entry script that passes the model on). Matching by name
    can only link too much, which costs a summary, never a finding."""
    present = {os.path.abspath(t.path) for t in texts}
    names: dict[str, set[str]] = {}
    for path in present:
        parts = path[:-3].split(os.sep)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        for depth in range(1, min(4, len(parts)) + 1):
            names.setdefault(".".join(parts[-depth:]), set()).add(path)
    found: set[str] = set()
    for text in texts:
        here = os.path.dirname(os.path.abspath(text.path))
        hits: set[str] = set()
        for match in _import_lines(text.text):
            spelled = [match.group(1)] if match.group(1) else match.group(2).split(",")
            spelled += _submodules(text.text, match)
            for name in (s.split(" as ")[0].strip() for s in spelled):
                if name.startswith("."):
                    hits |= _candidates(here, name) & present
                else:
                    hits |= names.get(name, set())
        hits.discard(os.path.abspath(text.path))
        if hits:
            found |= hits | {os.path.abspath(text.path)}
    return frozenset(found)


def _submodules(code: str, match: re.Match[str]) -> list[str]:
    """The modules ``from package import a, b`` may load besides the package: ``package.a``,
    ``package.b`` (``from . import models`` loads ``./models.py``), read from the rest of the
    line (a parenthesised list: its first line)."""
    package = match.group(1)
    if not package:
        return []
    end = code.find("\n", match.end())
    rest = code[match.end() : end if end != -1 else len(code)].split("#")[0]
    names = (n.split(" as ")[0].strip(" \t()\\") for n in rest.split(","))
    joint = package if package.endswith(".") else package + "."
    return [joint + n for n in names if n.isidentifier()]


def _candidates(here: str, spelled: str) -> set[str]:
    """The files a relative import (``..utils.data``) can load."""
    name = spelled.lstrip(".")
    for _ in range(len(spelled) - len(name) - 1):
        here = os.path.dirname(here)
    base = os.path.join(here, *name.split(".")) if name else here
    return {base + ".py", os.path.join(base, "__init__.py")}


def old_torch(folder: str) -> str:
    """The requirement that keeps a project on torch < 1.9 (DataLoader workers then do not
    reseed NumPy), as ``file: spec``; empty when none does (no pin, or only a lower bound)."""
    for where in _requirement_folders(folder):
        for name in REQUIREMENTS:
            try:
                with open(os.path.join(where, name), encoding="utf-8", errors="replace") as handle:
                    text = handle.read(200_000)
            except OSError:
                continue
            for match in TORCH_SPEC.finditer(text):
                if _below_1_9(match.group(1)):
                    return f"{name}: torch{match.group(1).strip()}"
    return ""


def _requirement_folders(folder: str) -> Iterable[str]:
    """The project's root and ``folder``; where no marker names the root (a repository read
    without its ``setup.py``), also the two folders above ``folder``: a loader built in
    ``datasets/__init__.py`` of a project whose ``requirements.txt`` is at its top."""
    root = project_root(folder)
    above = [os.path.dirname(folder), os.path.dirname(os.path.dirname(folder))]
    return dict.fromkeys((root, folder, *(above if root == folder else ())))


def _below_1_9(spec: str) -> bool:
    for op, major, minor in SPEC.findall(spec):
        version = (int(major), int(minor))
        if op in ("==", "=", "~=", "<=") and version < (1, 9):
            return True
        if op == "<" and version <= (1, 9):
            return True
    return False
