"""The package layers drawn in README's "Architecture" section, checked on every import.

Each subpackage of ``rgt`` has a rank; an import (at module level or inside a function, both
are real dependencies) may only go to a package of lower rank. Top-level modules
(``rgt/config.py``…) are nodes of their own: no cycle may run through them either.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "rgt"

# Bottom to top; README's Architecture section draws the same order.
RANKS = {
    "ckpt": 0,
    "lint": 0,
    "knowledge": 0,
    "profiles": 0,
    "triage": 0,
    "deliver": 0,
    "agent": 1,  # with its machine-side libraries agent/probes and agent/verdicts
    "verify": 2,  # judges artifacts with rgt.agent.verdicts
    "state": 2,
    "transport": 2,
    "backends": 3,
    "smoke": 3,
    "status": 4,
    "jobs": 5,
    "sweep": 6,
    "fetch": 6,
    "vendors": 7,
    "lifecycle": 8,
    "autostop": 9,
    "notebooks": 9,
    "demo": 9,
    "watch": 10,
    "verbs": 11,
    "mcp": 12,
    "ui": 12,
    "cli": 13,
}


def _node(parts: tuple[str, ...]) -> str:
    """``("rgt", "jobs", "launch")`` -> ``jobs``; ``("rgt", "config")`` -> ``rgt.config``."""
    if len(parts) >= 2 and (SRC / parts[1]).is_dir():
        return parts[1]
    return ".".join(parts[:2])


def _imports(path: Path, module: tuple[str, ...]) -> Iterator[tuple[str, ...]]:
    package = module if path.name == "__init__.py" else module[:-1]
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield tuple(alias.name.split("."))
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else ()
            target = base + tuple((node.module or "").split(".")) if node.module else base
            yield target
            for alias in node.names:  # `from rgt.state import store` imports a module
                yield (*target, alias.name)


def import_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in SRC.rglob("*.py"):
        rel = path.relative_to(SRC.parent).with_suffix("").parts
        module = rel[:-1] if rel[-1] == "__init__" else rel
        source = _node(module)
        for target in _imports(path, module):
            if len(target) < 2 or target[0] != "rgt":
                continue
            if not (SRC / target[1]).is_dir() and not (SRC / f"{target[1]}.py").is_file():
                continue  # `from rgt import __version__`
            dest = _node(target)
            if dest != source:
                graph.setdefault(source, set()).add(dest)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_every_package_has_a_layer() -> None:
    packages = {p.name for p in SRC.iterdir() if (p / "__init__.py").is_file()}
    assert packages - RANKS.keys() == set(), "add the new package to RANKS and README"


@pytest.mark.slow
def test_imports_only_go_down_the_layers() -> None:
    upward = [
        f"{source} -> {dest}"
        for source, dests in import_graph().items()
        for dest in dests
        if source in RANKS and dest in RANKS and RANKS[dest] >= RANKS[source]
    ]
    assert upward == []


def test_no_import_cycle_between_packages_or_top_level_modules() -> None:
    assert _cycles(import_graph()) == []


def test_the_checker_sees_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


# Only front ends (the CLI) talk to a human, through ``rgt.lifecycle.approvals``: a backend, a
# vendor client or autostop's arming that needs consent takes a ``Consent`` from its caller and,
# given none, raises ``ApprovalNeeded`` with the command to run.
NEVER_ASK = ("backends", "vendors", "transport", "jobs", "state", "sweep", "fetch", "watch")
NEVER_ASK += ("status", "autostop", "notebooks", "smoke", "verbs", "mcp", "ui")
HUMAN = (("rgt", "lifecycle", "approvals"), ("rgt", "_tty"))


def _asks(target: tuple[str, ...]) -> bool:
    return any(target[: len(human)] == human for human in HUMAN)


def test_backends_and_vendors_never_ask_a_human() -> None:
    asking = {
        f"{path.relative_to(SRC)}: {'.'.join(target)}"
        for package in NEVER_ASK
        for path in (SRC / package).rglob("*.py")
        for target in _imports(path, path.relative_to(SRC.parent).with_suffix("").parts)
        if _asks(target)
    }
    assert asking == set()


def test_the_human_check_sees_an_import() -> None:
    assert _asks(("rgt", "lifecycle", "approvals", "approve_at_terminal"))
    assert _asks(("rgt", "_tty")) and not _asks(("rgt", "lifecycle", "gate"))


# The front ends stand side by side over the same verbs: the MCP server and the dashboard call
# the library (``rgt.verbs`` and below), never the CLI, and the verbs know no front end and no
# terminal toolkit. `rgt mcp` and `rgt ui` are CLI commands (rgt/cli/mcp.py, rgt/cli/ui.py) that
# start them.
FRONT_ENDS = ("mcp", "ui")


def _imported_by(package: str) -> set[tuple[str, str]]:
    return {
        (str(path.relative_to(SRC)), ".".join(target))
        for path in (SRC / package).rglob("*.py")
        for target in _imports(path, path.relative_to(SRC.parent).with_suffix("").parts)
    }


@pytest.mark.parametrize("package", FRONT_ENDS)
def test_mcp_and_ui_never_import_the_cli(package: str) -> None:
    reaching = {
        f"{path}: {target}"
        for path, target in _imported_by(package)
        if target == "rgt.cli" or target.startswith("rgt.cli.")
    }
    assert reaching == set()


def test_the_verbs_know_no_front_end_and_no_terminal() -> None:
    front = ("rgt.cli", "rgt.mcp", "rgt.ui", "click", "rich")
    reaching = {
        f"{path}: {target}"
        for path, target in _imported_by("verbs")
        if any(target == name or target.startswith(name + ".") for name in front)
    }
    assert reaching == set()


# Inside the agent, probes/ and verdicts/ are the libraries the CLI side reuses (audit, the
# Python gate, smoke, pull, verify): they import nothing of rgt but themselves and the shared
# single files, so using them here never loads the supervisor, and the agent's own modules
# build on them, never the other way round.
AGENT_LIBRARIES = ("probes", "verdicts")


def _outside(target: str, own: str) -> bool:
    """Whether ``target`` (a dotted import) is rgt code other than ``own`` and the shared files."""
    if target != "rgt" and not target.startswith("rgt."):
        return False  # the standard library (or an optional extra, guarded where it is used)
    allowed = (own, "rgt._fs", "rgt.errors")
    return target != "rgt" and not any(target == a or target.startswith(a + ".") for a in allowed)


@pytest.mark.parametrize("library", AGENT_LIBRARIES)
def test_the_agents_libraries_stand_alone(library: str) -> None:
    own = f"rgt.agent.{library}"
    reaching = {
        f"{path}: {target}"
        for path, target in _imported_by(f"agent/{library}")
        if _outside(target, own)
    }
    assert reaching == set()


def test_the_stand_alone_check_sees_an_import() -> None:
    own = "rgt.agent.verdicts"
    assert _outside("rgt.agent.supervisor", own) and _outside("rgt.agent.probes.gpu", own)
    assert _outside("rgt.triage", own) and _outside("rgt.agent", own)
    assert not _outside("rgt.agent.verdicts._records", own) and not _outside("rgt._fs", own)
    assert not _outside("rgt", own) and not _outside("os.path", own)
