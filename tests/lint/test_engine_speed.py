"""What the lint engine does to be fast must not change what it answers: the bindings index
built on demand, the collector left as found, the program's early exit with all its output,
the project words found without cutting every string out of a file."""

from __future__ import annotations

import ast
import gc
import json
import os
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from rgt.lint import lint_paths
from rgt.lint._facts import Facts
from rgt.lint._nodes import bound_names
from rgt.lint._project import Project
from rgt.lint._run import LOCAL, SPELLED
from rgt.lint._tree import BIND_TYPES, nodes
from rgt.lint._words import CUDA_STRING, NOT_CODE, identifiers
from tests.lint._lint import corpus_trees
from tests.lint.measure import CORPUS

SRC = Path(__file__).resolve().parents[2] / "src"
BUGGY = "import torch.nn.functional as F\n\ndef step(model, x, y):\n"
BUGGY += "    return F.nll_loss(F.softmax(model(x), dim=1), y)\n"


def _parents(tree: ast.AST) -> dict[int, ast.AST]:
    return {id(child): node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def _scope(parents: dict[int, ast.AST], node: ast.AST, tree: ast.Module) -> ast.AST:
    while id(node) in parents:
        node = parents[id(node)]
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            return node
    return tree


def _expected(tree: ast.Module) -> dict[tuple[int, str], list[tuple[int, str]]]:
    """(scope, name) → (line, value) of each binding in walk order, from parent links."""
    parents = _parents(tree)
    found: dict[tuple[int, str], list[tuple[int, str]]] = defaultdict(list)
    for node in nodes(tree)[1]:
        if type(node) in BIND_TYPES:
            scope = id(_scope(parents, node, tree))
            for name, value in bound_names(node).items():
                shown = "" if value is None else ast.dump(value)
                found[(scope, name)].append((node.lineno, shown))  # type: ignore[attr-defined]
    return found


@pytest.mark.parametrize("half", ["dev", "heldout"])
def test_last_value_is_the_last_binding_before_the_line_in_its_scope(half: str) -> None:
    checked = 0
    for script, tree in corpus_trees(half):
        facts = Facts.build(tree)
        for (scope, name), bindings in _expected(tree).items():
            owner = next(s for s in [tree, *facts.functions] if id(s) == scope)
            for before in sorted({line for line, _ in bindings} | {10**9}):
                best = (-1, "")
                for line, shown in bindings:
                    if best[0] <= line < before:
                        best = (line, shown)
                value = facts.last_value(owner, name, before)
                assert ("" if value is None else ast.dump(value)) == best[1], (script, name)
                checked += 1
    assert checked > 1000


def test_lint_paths_leaves_the_collector_as_it_found_it(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(BUGGY)
    assert gc.isenabled()
    assert len(lint_paths([str(tmp_path)], cache=False).findings) == 1
    assert gc.isenabled()
    gc.disable()
    try:
        lint_paths([str(tmp_path)], cache=False)
        assert not gc.isenabled()
    finally:
        gc.enable()


@pytest.mark.parametrize(("code", "exit_code"), [(BUGGY, 1), ("import torch\n", 0)])
def test_the_program_leaves_early_with_its_whole_output_and_code(
    tmp_path: Path, code: str, exit_code: int
) -> None:
    """``rgt lint`` as a program skips the interpreter's teardown (``cli.lint.leave``): the
    JSON document is whole, on a pipe and in a file, and the exit code is the report's."""
    (tmp_path / "train.py").write_text(code)
    argv = [sys.executable, "-m", "rgt.cli", "lint", "--json", "--no-cache", str(tmp_path)]
    env = {**os.environ, "PYTHONPATH": str(SRC), "RGT_HOME": str(tmp_path / "home")}
    piped = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60)
    assert piped.returncode == exit_code, piped.stderr
    assert len(json.loads(piped.stdout)["findings"]) == exit_code
    with open(tmp_path / "out.json", "w") as sink:
        written = subprocess.run(argv, stdout=sink, env=env, timeout=60, check=False)
    assert written.returncode == exit_code
    assert json.loads((tmp_path / "out.json").read_text()) == json.loads(piped.stdout)


def _identifiers_by_cutting(code: str, known: frozenset[str]) -> set[str]:
    """``_words.identifiers`` as it reads: strings and comments cut out, then each word
    looked for as a whole identifier with a regex."""
    bare = NOT_CODE.sub(" ", code)
    found = {
        w
        for w in SPELLED - known
        if re.search(rf"(?<![A-Za-z0-9_]){re.escape(w)}(?![A-Za-z0-9_])", bare)
    }
    if "cuda" not in found | known and CUDA_STRING.search(code):
        found.add("cuda")
    return found


TRICKY = [
    'x = "cuda"  # cuda\ncuda',
    "'''\ncuda'''\nx.cuda()",
    'a = "Dropout"\n# nn.Dropout()\n',
    'f"{x.cuda()}"\nnn.Dropout2d()',
    "cuda#x\n",
    '"a"cuda"b"',
    "nn.BatchNorm2d(3); y = 'SyncBatchNorm'",
    "resume = 1  # load_state_dict",
]


def test_project_words_are_those_spelled_outside_strings_and_comments() -> None:
    texts = [p.read_text() for p in sorted(CORPUS.glob("*/*.py.txt"))] + TRICKY
    for known in (frozenset(), LOCAL, SPELLED - LOCAL):
        for code in texts:
            assert identifiers(code, known) == _identifiers_by_cutting(code, known), code[:80]


def _module_by_joining(project: Project, importer: str, name: str, level: int) -> str | None:
    """``Project.module`` as it was: every folder looked in, two joined paths each."""

    def find(folder: str, dotted: str) -> str | None:
        base = os.path.join(folder, *dotted.split("."))
        found = project.by_abs.get(base + ".py")
        return found or project.by_abs.get(os.path.join(base, "__init__.py"))

    here = os.path.dirname(os.path.abspath(importer))
    if level:
        for _ in range(level - 1):
            here = os.path.dirname(here)
        return find(here, name or "__init__")
    return next((f for f in (find(d, name) for d in project._folders(here)) if f), None)


def test_an_import_resolves_as_it_did_when_every_folder_was_joined(tmp_path: Path) -> None:
    """The quick miss of an import no linted file can answer (``torch``, a name only a
    sibling folder holds) answers what the joined paths answer, for packages, ``src/``, a
    ``sys.path`` folder and relative imports, from every file."""
    layout = ["setup.py", "train.py", "pkg/__init__.py", "pkg/model.py", "pkg/sub/__init__.py",
              "pkg/sub/net.py", "src/lib/__init__.py", "src/lib/data.py", "tools/run.py",
              "tools/model.py", "extra/helpers.py", "deep/a/b/c.py"]  # fmt: skip
    for name in layout:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    paths = [str(tmp_path / n) for n in layout if n.endswith(".py") and n != "setup.py"]
    summaries = {p: {"imports": [], "paths": [str(tmp_path / "extra")]} for p in paths[:2]}
    names = ["torch", "torch.nn", "pkg", "pkg.model", "pkg.sub", "pkg.sub.net", "pkg.nothing",
             "lib", "lib.data", "model", "helpers", "sub.net", "a.b.c", "b.c", "c", "tools.run",
             "", "__init__", "deep", "deep.a"]  # fmt: skip
    asked = 0
    for level in (0, 1, 2, 3):
        project = Project(summaries, paths)
        for importer in paths:
            for name in names:
                if not name and not level:
                    continue
                got = project.module(importer, name, level)
                assert got == _module_by_joining(project, importer, name, level), (importer, name)
                asked += got is not None
    assert asked > 50  # most of these lead somewhere: the comparison is not of misses only
