"""``Facts`` answers "what is around this node" and "what is inside this loop" from source
spans; every answer must equal the syntax tree's own parent links, on real code."""

from __future__ import annotations

import ast
import textwrap

import pytest

from rgt.lint._facts import Facts
from tests.lint._lint import corpus_trees

BLOCKS = (ast.For, ast.AsyncFor, ast.While, ast.With, ast.FunctionDef, ast.AsyncFunctionDef)
FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
CONTAINERS = (ast.For, ast.AsyncFor, ast.While, *FUNCTIONS)  # calls_in: in source order


def _parents(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    return {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def _ancestors(parents: dict[ast.AST, ast.AST], node: ast.AST) -> list[ast.AST]:
    found = []
    while node in parents:
        node = parents[node]
        found.append(node)
    return found


def _check(tree: ast.Module) -> int:
    facts = Facts.build(tree)
    parents = _parents(tree)
    checked = 0
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call | ast.Name | ast.Assign | ast.For | ast.FunctionDef):
            continue
        ancestors = _ancestors(parents, node)
        assert facts.around(node) == [a for a in ancestors if isinstance(a, BLOCKS)]
        functions = [a for a in ancestors if isinstance(a, FUNCTIONS)]
        assert facts.scope_of(node) is (functions[0] if functions else tree)
        if isinstance(node, CONTAINERS):
            inside = [n for n in ast.walk(node) if n is not node]
            calls = sorted((n for n in inside if isinstance(n, ast.Call)), key=_key)
            assert facts.calls_in(node) == calls
            loops = [n for n in inside if isinstance(n, ast.For | ast.While | ast.AsyncFor)]
            assert facts.loops_in(node) == sorted(loops, key=_key)
        checked += 1
    return checked


def _key(node: ast.AST) -> tuple[int, int]:
    return node.lineno, node.col_offset  # type: ignore[attr-defined]


def test_spans_give_what_parent_links_give_on_awkward_code() -> None:
    code = textwrap.dedent(
        """
        import torch

        @torch.no_grad()
        @register(name=make_name())
        def evaluate(model, loader=build(), *, n=count()):
            def inner(x=default()):
                return model(x)
            with torch.autocast("cuda"):
                for x in loader: total = step(x); log(total)
            else_part = [f(y) for y in g()]
            return else_part

        class Trainer:
            limit = compute()

            def fit(self):
                while self.go(): self.step()
                else:
                    self.done()
                for a in b(): pass
                c = lambda: d()

        for epoch in range(3):
            @decorate(epoch)
            def per_epoch(): return train(epoch)
        """
    )
    assert _check(ast.parse(code)) > 40


@pytest.mark.parametrize("half", ["dev", "heldout"])
def test_spans_give_what_parent_links_give_on_the_corpus(half: str) -> None:
    checked = 0
    for _script, tree in corpus_trees(half):
        checked += _check(tree)
    assert checked > 5000


def test_a_node_made_by_the_rules_has_no_surroundings() -> None:
    tree = ast.parse("def f():\n    a, b = g()\n")
    facts = Facts.build(tree)
    made = ast.Subscript(ast.Name("g"), ast.Constant(1), ast.Load())  # as bound_names makes
    assert facts.around(made) == [] and facts.scope_of(made) is tree
