"""Where a syntax node's source starts and ends, and what encloses a position.

A syntax tree's spans nest, so "the function around this node" is found by bisection over the
functions' start positions, then up a precomputed chain of enclosing spans; no parent map of
every node is built (``Facts`` keeps one ``Spans`` for functions and one for blocks).
"""

from __future__ import annotations

import ast
from bisect import bisect_right
from collections.abc import Sequence


def position(node: ast.AST) -> tuple[int, int]:
    return getattr(node, "lineno", 0), getattr(node, "col_offset", 0)


def start(node: ast.AST) -> tuple[int, int]:
    """Where a node's source starts: a decorated definition at its first decorator."""
    first = getattr(node, "decorator_list", None) or [node]
    return min(position(first[0]), position(node))


def end(node: ast.AST) -> tuple[int, int]:
    return getattr(node, "end_lineno", 0) or 0, getattr(node, "end_col_offset", 0) or 0


class Spans:
    """Functions by their spans, each with the innermost function around it, to find the
    function around a position in O(log n) (spans nest: the last function to start before
    it, or one of that function's outer ones)."""

    def __init__(self, nodes: Sequence[ast.AST]) -> None:
        starts = list(map(start, nodes))
        keyed = sorted(zip(starts, range(len(nodes)), nodes, strict=True))  # stable, by start
        self.nodes = [node for _, _, node in keyed]
        self.starts = [begins for begins, _, _ in keyed]
        self.ends = [end(f) for f in self.nodes]
        self.outer: list[int] = []
        open_: list[int] = []
        for index, begins in enumerate(self.starts):
            while open_ and not begins < self.ends[open_[-1]]:
                open_.pop()
            self.outer.append(open_[-1] if open_ else -1)
            open_.append(index)

    def around(self, node: ast.AST) -> ast.AST | None:
        """The innermost span around ``node`` (not ``node`` itself), if any: ``chain``'s
        first, without its list (asked of every binding and most calls)."""
        line = getattr(node, "lineno", _MISSING)
        if line is _MISSING:
            return None  # made here (``bound_names``), not parsed: nothing is known around it
        at = (line, getattr(node, "col_offset", 0))
        ends, nodes, outer = self.ends, self.nodes, self.outer
        index = bisect_right(self.starts, at) - 1
        while index >= 0:  # spans nest: the rest are around this one
            if at < ends[index] and nodes[index] is not node:
                return nodes[index]
            index = outer[index]
        return None

    def chain(self, node: ast.AST, most: int = -1) -> list[ast.AST]:
        """The spans around ``node``, innermost first (``most``: at most that many)."""
        line = getattr(node, "lineno", _MISSING)
        if line is _MISSING:
            return []  # made here (``bound_names``), not parsed: nothing is known around it
        at = (line, getattr(node, "col_offset", 0))
        ends, nodes, outer = self.ends, self.nodes, self.outer
        found: list[ast.AST] = []
        index = bisect_right(self.starts, at) - 1
        while index >= 0 and len(found) != most:  # spans nest: the rest are around this one
            if at < ends[index] and nodes[index] is not node:
                found.append(nodes[index])
            index = outer[index]
        return found


_MISSING = object()
