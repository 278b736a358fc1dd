"""A notebook's code: its code cells joined into one text, each line's cell remembered.

IPython's line magics and shell escapes (``%pip``, ``!nvidia-smi``) become ``pass`` and cells of
another language (``%%bash``) are blanked, so the text parses as Python and every line keeps
its number within its cell (``Source.locate``).
"""

from __future__ import annotations

import json


def notebook_code(text: str) -> tuple[str, tuple[tuple[int, int], ...]] | None:
    """The code cells joined into one text (IPython magics and shell escapes blanked), and for
    each joined line its (cell number from 1, line in that cell)."""
    try:
        book = json.loads(text)
        cells = book.get("cells", []) if isinstance(book, dict) else None
    except ValueError:
        return None
    if not isinstance(cells, list):
        return None
    lines: list[str] = []
    where: list[tuple[int, int]] = []
    for number, cell in enumerate(cells, start=1):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        body = "".join(source) if isinstance(source, list) else str(source)
        foreign = _foreign_cell(body)
        for index, line in enumerate(body.splitlines(), start=1):
            lines.append("" if foreign else _without_magic(line))
            where.append((number, index))
        lines.append("")
        where.append((number, len(body.splitlines()) + 1))
    return "\n".join(lines), tuple(where)


# Cell magics whose body is Python (`%%time` then code); any other (`%%bash`, `%%writefile`,
# `%%html`...) makes the whole cell something else.
PYTHON_CELLS = {"time", "timeit", "capture", "prun", "debug", "python", "python3", "pypy"}


def _foreign_cell(body: str) -> bool:
    first = body.lstrip().split("\n", 1)[0]
    if not first.startswith("%%"):
        return False
    return first[2:].split(" ", 1)[0].strip() not in PYTHON_CELLS


def _without_magic(line: str) -> str:
    """An IPython line magic or shell escape (``%pip``, ``!nvidia-smi``, ``?obj``) becomes a
    ``pass`` at its indentation: blanking it could leave an ``if`` with an empty body."""
    stripped = line.lstrip()
    if not stripped.startswith(("%", "!", "?")):
        return line
    return line[: len(line) - len(stripped)] + "pass"
