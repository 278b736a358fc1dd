"""Small questions about one syntax node: its dotted name, its method, a keyword's value, a
literal, the names a statement binds. No module-wide state (that is ``_facts.Facts``)."""

from __future__ import annotations

import ast

from rgt.lint._tree import walk


def dotted(node: ast.AST) -> str | None:
    """``a.b.c`` for a chain of names and attributes, else None (calls, subscripts...)."""
    kind = type(node)
    if kind is _NAME:  # the hot path: the rules ask this of every target and callee
        return node.id  # type: ignore[attr-defined, no-any-return]
    if kind is _ATTRIBUTE and type(node.value) is _NAME:  # type: ignore[attr-defined]
        return f"{node.value.id}.{node.attr}"  # type: ignore[attr-defined]
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


_NAME, _ATTRIBUTE, _CALL = ast.Name, ast.Attribute, ast.Call


def method(call: ast.AST) -> str | None:
    """The method name of ``anything.name(...)``, else None."""
    if type(call) is not _CALL and not isinstance(call, ast.Call):
        return None
    func = call.func  # type: ignore[attr-defined]
    if type(func) is _ATTRIBUTE or isinstance(func, ast.Attribute):
        return func.attr  # type: ignore[no-any-return]
    return None


def keyword(call: ast.Call, name: str) -> ast.expr | None:
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
    return None


def constant(node: ast.AST | None) -> object:
    """The literal value of a constant node (``-1`` too), else the ``NOT_CONSTANT`` marker."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = constant(node.operand)
        if isinstance(inner, int | float) and not isinstance(inner, bool):
            return -inner
    return NOT_CONSTANT


NOT_CONSTANT = object()


def bound_names(node: ast.AST) -> dict[str, ast.AST | None]:
    """Names a statement binds, each with its value (None when not one plain value);
    ``a, b = model(x)`` binds ``b`` to ``model(x)[1]``, ``with open(p) as f`` binds ``open(p)``."""
    out: dict[str, ast.AST | None] = {}
    if isinstance(node, ast.Assign):
        for target in node.targets:
            if isinstance(target, ast.Name):
                out[target.id] = node.value
                continue
            out.update(dict.fromkeys(names_in(target)))
            if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Call):
                for index, elt in enumerate(target.elts):
                    if isinstance(elt, ast.Name):
                        out[elt.id] = ast.Subscript(node.value, ast.Constant(index), ast.Load())
    elif isinstance(node, ast.AugAssign | ast.AnnAssign) and isinstance(node.target, ast.Name):
        out[node.target.id] = node.value if isinstance(node, ast.AnnAssign) else None
    elif isinstance(node, ast.For):
        out.update(dict.fromkeys(names_in(node.target)))
    elif isinstance(node, ast.With):
        for item in node.items:
            if isinstance(item.optional_vars, ast.Name):
                out[item.optional_vars.id] = item.context_expr
    return out


def names_in(node: ast.AST) -> list[str]:
    """Every ``Name`` in a subtree, in ``ast.walk`` order; a target that is only names,
    tuples and lists (nearly all) without the generic walk."""
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Tuple | ast.List) and all(type(e) is ast.Name for e in node.elts):
        return [e.id for e in node.elts]  # type: ignore[attr-defined]  # all Names
    base = node
    while type(base) is ast.Attribute:  # ``self.fc = ...``: its one name is the base's
        base = base.value  # type: ignore[attr-defined]
    if type(base) is ast.Name:
        return [base.id]  # type: ignore[attr-defined]
    return [n.id for n in walk(node) if isinstance(n, ast.Name)]


def defaults(func: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> dict[str, ast.expr]:
    """A function's positional parameters that have a default, with it (``def f(a, b=1)``:
    ``{"b": 1}``): the defaults belong to the last parameters."""
    args = func.args.posonlyargs + func.args.args
    given = func.args.defaults
    return dict(zip([a.arg for a in args[len(args) - len(given) :]], given, strict=True))


# Methods that reshape or move a tensor and keep what it holds (``y_pred.view(-1, n)``).
SHAPES = {"view", "reshape", "resize", "squeeze", "unsqueeze", "flatten", "contiguous",
          "transpose", "permute", "float", "double", "to", "cuda", "cpu", "type"}  # fmt: skip
# The same as functions: ``torch.squeeze(pred)``.
SHAPE_FUNCTIONS = {f"torch.{name}" for name in ("squeeze", "unsqueeze", "flatten", "reshape")}


def unshaped(node: ast.AST) -> ast.AST:
    """``y_pred.resize(1, n).float()`` and ``torch.squeeze(y_pred)`` are ``y_pred``."""
    while isinstance(node, ast.Call):
        if dotted(node.func) in SHAPE_FUNCTIONS:
            if not node.args:
                break
            node = node.args[0]
        elif method(node) in SHAPES:
            node = node.func.value  # type: ignore[attr-defined]  # a method: an Attribute
        else:
            break
    return node


def local_name(call: ast.Call) -> str | None:
    """``name`` of a call ``name(...)`` or ``self.name(...)``."""
    if isinstance(call.func, ast.Name):
        return call.func.id
    func = call.func
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        return func.attr if func.value.id == "self" else None
    return None


def methods_of(cls: ast.ClassDef) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    """The functions a class body defines, in order."""
    return [f for f in cls.body if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)]
