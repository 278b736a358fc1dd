"""Server-rendered HTML: complete without JavaScript (the JS only refreshes and draws curves).

The fragments the JS swaps in after an SSE update are the same templates the pages include, so
a refreshed section cannot differ from a reloaded page.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import jinja2
from starlette.responses import HTMLResponse

TEMPLATES = Path(__file__).resolve().parent / "templates"


@cache
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["bytes"] = human_bytes
    env.filters["money"] = money
    env.globals["query"] = query
    env.globals["explain_href"] = explain_href
    return env


def render(template: str, status: int = 200, **context: Any) -> HTMLResponse:
    html = environment().get_template(template).render(**context)
    return HTMLResponse(html, status_code=status)


def not_found(what: str, name: str) -> HTMLResponse:
    return render("not_found.html", status=404, page="not-found", what=what, name=name)


def human_bytes(value: Any) -> str:
    if value is None:
        return "?"
    size = float(value)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(size) < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TiB"


def money(value: Any) -> str:
    return "—" if value is None else f"{float(value):.2f}"


@cache
def explain_href(key: Any) -> str | None:
    """``/explain/ID`` when the catalog has an entry for a label, lint code or event kind;
    None (no link) otherwise. A machine's string reaches here: it is only ever looked up."""
    from rgt import knowledge

    if not isinstance(key, str) or not key or len(key) > 80:
        return None
    try:
        return f"/explain/{knowledge.lookup(key).id}"
    except ValueError:  # no such entry (UsageError), or a catalog file that does not parse
        return None


def query(**params: Any) -> str:
    """``?a=1&b=2`` without the empty values (for pager links that keep the filters)."""
    kept = {k: v for k, v in params.items() if v not in (None, "")}
    return "?" + urlencode(kept) if kept else ""
