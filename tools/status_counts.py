"""Issue 34's "one read" numbers, counted from the source (``ast``, no import of rgt).

- ``seam reads``: the methods of ``Backend`` (src/rgt/backends/base.py) that read a job's state
  (``status``, ``statuses``, ``machine_jobs``, ``read_machine``, ``read_jobs``, ``interpret``);
- ``cache writers``: calls that put a job's state into the local cache: ``update_job(...,
  state=...)``, ``add_job(spec, STATE)`` and the status path's ``write(store, ...)``;
- ``dict reads``: ``X["state"]`` and ``X.get("state")``, by file. ``ckpt/`` (a training
  loop's state), ``vendors/`` (an instance's state), ``fetch/`` (a download's state), ``lint/``
  and ``agent/`` (which writes the status files) read other states and are left out; so is the
  status module itself (``status/``, ``backends/statusdoc.py``);
- ``terminal sets``: set, tuple, list or frozenset literals that spell all of succeeded,
  failed and cancelled (as strings or ``JobState`` members).

    python tools/status_counts.py [SRC_DIR] [--files]
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

READS = ("status", "statuses", "machine_jobs", "read_machine", "read_jobs", "interpret")
OTHER_STATES = ("ckpt/", "vendors/", "fetch/", "lint/", "agent/")
STATUS_MODULE = ("status/", "backends/statusdoc.py")
ENDS = {"succeeded", "failed", "cancelled"}


def seam_reads(src: Path) -> list[str]:
    tree = ast.parse((src / "backends" / "base.py").read_text("utf-8"))
    backend = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Backend")
    return [n.name for n in backend.body if isinstance(n, ast.FunctionDef) and n.name in READS]


def _is_state_read(node: ast.AST) -> bool:
    if isinstance(node, ast.Subscript):
        return isinstance(node.slice, ast.Constant) and node.slice.value == "state"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        first = node.args[0] if node.args else None
        return (
            node.func.attr == "get" and isinstance(first, ast.Constant) and first.value == "state"
        )
    return False


def _is_cache_write(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
        return False
    name, words = node.func.attr, {k.arg for k in node.keywords}
    if name == "update_job":
        return "state" in words
    if name == "add_job":
        return len(node.args) > 1 or "state" in words
    first = node.args[0] if node.args else None
    return name == "write" and isinstance(first, ast.Name) and first.id == "store"


def _is_terminal_set(node: ast.AST) -> bool:
    if isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("frozenset", "set"):
        return bool(node.args) and _is_terminal_set(node.args[0])
    if not isinstance(node, (ast.Set, ast.Tuple, ast.List)):
        return False
    words = {e.value if isinstance(e, ast.Constant) else getattr(e, "attr", "") for e in node.elts}
    return {str(w).lower() for w in words} >= ENDS


def _lines(src: Path, test: Callable[[ast.AST], bool]) -> Iterator[tuple[str, int]]:
    for path in sorted(src.rglob("*.py")):
        rel = path.relative_to(src).as_posix()
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if test(node):
                yield rel, getattr(node, "lineno", 0)


def main(argv: list[str]) -> None:
    src = Path(next((a for a in argv if not a.startswith("-")), "src/rgt"))
    reads = [(f, n) for f, n in _lines(src, _is_state_read) if not f.startswith(OTHER_STATES)]
    outside = [(f, n) for f, n in reads if not f.startswith(STATUS_MODULE)]
    writes = list(_lines(src, _is_cache_write))
    sets = [(f, n) for f, n in _lines(src, _is_terminal_set) if not f.startswith("lint/")]
    print(f"seam reads: {len(seam_reads(src))} ({', '.join(seam_reads(src))})")
    print(f"cache writers: {len(writes)} in {len({f for f, _ in writes})} files")
    print(
        f"dict reads of state outside the status module: {len(outside)} in "
        f"{len({f for f, _ in outside})} files"
    )
    print(f"terminal-state literal sets: {len(sets)} in {len({f for f, _ in sets})} files")
    if "--files" in argv:
        for label, found in (("writer", writes), ("read", outside), ("set", sets)):
            print("\n".join(f"  {label} {f}:{n}" for f, n in found))


if __name__ == "__main__":
    main(sys.argv[1:])
