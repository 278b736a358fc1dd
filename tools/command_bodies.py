"""How thin the CLI is: the length of each click command's body in src/rgt/cli/*.py.

A body is the function's statements after its docstring, from the first line of the first to
the last line of the last (blank lines and comments between them count: they are read too).
A command is a function decorated with ``@click.command``/``@click.group`` or ``@X.command``/
``@X.group``, anywhere under src/rgt (``rgt mcp`` and ``rgt ui`` once lived in their packages);
a group with no body of its own (only a docstring) is not counted. Prints the median, the
longest and each command over the budget (STYLE.md: a body under 15 lines; issue 34: median at
most 12, none over 40).

    python tools/command_bodies.py [SRC_DIR] [--all]
"""

from __future__ import annotations

import ast
import statistics
import sys
from pathlib import Path

CEILING = 40


def is_command(node: ast.FunctionDef) -> bool:
    for decorator in node.decorator_list:
        call = decorator.func if isinstance(decorator, ast.Call) else decorator
        if isinstance(call, ast.Attribute) and call.attr in ("command", "group"):
            return True
    return False


def body_lines(node: ast.FunctionDef) -> int:
    body = node.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # the docstring is --help, not code
    if not body:
        return 0
    return (body[-1].end_lineno or body[-1].lineno) - body[0].lineno + 1


def commands(package: Path) -> dict[str, int]:
    found = {}
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.FunctionDef) and is_command(node) and body_lines(node):
                found[f"{path.relative_to(package)}:{node.name}"] = body_lines(node)
    return found


def main(argv: list[str]) -> None:
    root = Path(argv[0]) if argv and not argv[0].startswith("-") else Path("src")
    found = commands(root / "rgt")
    lengths = sorted(found.values())
    longest = max(found, key=lambda k: found[k])
    print(f"commands: {len(found)}  median body: {statistics.median(lengths)} lines")
    print(f"longest: {longest} {found[longest]}")
    over = {k: v for k, v in found.items() if v > CEILING}
    print(f"over {CEILING}: " + (", ".join(f"{k} {v}" for k, v in over.items()) or "none"))
    if "--all" in argv:
        for name, length in sorted(found.items(), key=lambda kv: -kv[1]):
            print(f"  {length:4d}  {name}")


if __name__ == "__main__":
    main(sys.argv[1:])
