"""Documents whose numbers are generated from the evidence store, never retyped.

Templates are Jinja2 with delimiters that do not clash with LaTeX braces or Markdown:

    ((* for ... *)) ... ((* endfor *))    blocks
    << metric("RUN_ID", "val_accuracy", digits=3) >>        one run's metric
    << agg("train_demo-*", "val_accuracy", percent=true) >> mean ± 95 % CI (n=3) over runs
    << claim("acc-main") >>                                  a claim from EVIDENCE.json
    ((# a comment #))

``agg`` and ``claim`` take ``ci=false`` to print the bare number, and ``aggregate=`` (mean,
median, max, min, value). Percent signs are escaped in ``.tex`` outputs. A citation of a run,
metric or claim that does not exist is an error naming it; an undefined name is an error too
(StrictUndefined), never an empty string.
"""

from __future__ import annotations

import fnmatch
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rgt._fs import atomic_write_bytes, atomic_write_json
from rgt.deliver.evidence import ClaimValue, claim_value, get_claim
from rgt.deliver.numbers import NumberFormat
from rgt.deliver.runs import load_stored, stored_run_ids
from rgt.deliver.stats import Summary, summarize
from rgt.deliver.workspace import Workspace
from rgt.errors import SpecError, UsageError

DELIMITERS: dict[str, Any] = {
    "block_start_string": "((*",
    "block_end_string": "*))",
    "variable_start_string": "<<",
    "variable_end_string": ">>",
    "comment_start_string": "((#",
    "comment_end_string": "#))",
}
LATEX_SUFFIXES = {".tex", ".ltx", ".sty"}


@dataclass
class RenderResult:
    out: Path
    citations: list[dict[str, Any]] = field(default_factory=list)


class _Citer:
    """The functions a template may call; each records what it cited."""

    def __init__(self, ws: Workspace, latex: bool) -> None:
        self.ws, self.latex = ws, latex
        self.citations: list[dict[str, Any]] = []

    def metric(self, run_id: str, name: str, digits: int = 4, percent: bool = False) -> str:
        value = load_stored(self.ws, run_id).metric(name).value
        self.citations.append({"kind": "metric", "runs": [run_id], "metric": name})
        return NumberFormat(digits, percent).render(value, latex=self.latex)

    def agg(
        self,
        runs: str | list[str],
        name: str,
        aggregate: str = "mean",
        digits: int = 4,
        percent: bool = False,
        ci: bool = True,
    ) -> str:
        run_ids = self._runs(runs)
        values = [load_stored(self.ws, r).metric(name).value for r in run_ids]
        summary = summarize(values, aggregate)
        self.citations.append({"kind": "aggregate", "runs": list(run_ids), "metric": name})
        return _with_ci(summary, NumberFormat(digits, percent), ci, self.latex)

    def claim(self, claim_id: str, ci: bool = False) -> str:
        value: ClaimValue = claim_value(self.ws, get_claim(self.ws, claim_id))
        self.citations.append({"kind": "claim", "claim": claim_id, "runs": list(value.run_ids)})
        return _with_ci(value.summary, value.claim.format, ci, self.latex)

    def _runs(self, runs: str | list[str]) -> tuple[str, ...]:
        if isinstance(runs, list):
            return tuple(runs)
        matched = tuple(r for r in stored_run_ids(self.ws) if fnmatch.fnmatchcase(r, runs))
        if not matched:
            raise UsageError(
                f"no recorded run matches {runs!r}",
                fix="record the runs (`rgt deliver record`) or fix the run id / glob",
            )
        return matched


def _with_ci(summary: Summary, fmt: NumberFormat, ci: bool, latex: bool) -> str:
    text = fmt.render(summary.value, latex=latex)
    if not ci:
        return text
    if summary.ci_half is None:
        return f"{text} (n={summary.n})"
    half = fmt.render(summary.ci_half, latex=latex)
    pm, level = (r"$\pm$", r"95\,\%") if latex else ("±", "95 %")
    return f"{text} {pm} {half} ({level} CI, n={summary.n})"


def render(ws: Workspace, template: Path | str, out: Path | str) -> RenderResult:
    """Render ``template`` to ``out`` (atomically) and remember the pair for ``repro``."""
    import jinja2

    template, out = Path(template), Path(out)
    if not template.is_file():
        raise UsageError(f"no template at {template}", fix="pass the path of a template file")
    citer = _Citer(ws, latex=out.suffix.lower() in LATEX_SUFFIXES)
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(template.parent)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
        **DELIMITERS,
    )
    env.globals.update(metric=citer.metric, agg=citer.agg, claim=citer.claim)
    try:
        text = env.get_template(template.name).render()
    except jinja2.TemplateSyntaxError as exc:
        raise SpecError(
            f"{template}:{exc.lineno}: {exc.message}", path=str(template), fix=_SYNTAX_FIX
        ) from exc
    except jinja2.UndefinedError as exc:
        raise UsageError(f"{template}: {exc.message}", fix=_SYNTAX_FIX) from exc
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(str(out), text.encode("utf-8"))
    _remember(ws, template, out)
    return RenderResult(out, citer.citations)


_SYNTAX_FIX = (
    "templates use << expr >> for values and ((* *)) for blocks; cite with "
    "metric(run, name), agg(runs, name) or claim(id)"
)


def _remember(ws: Workspace, template: Path, out: Path) -> None:
    entry = {"template": ws.rel(template), "out": ws.rel(out)}
    documents = load_documents(ws)
    if entry not in documents:
        documents = [d for d in documents if d["out"] != entry["out"]] + [entry]
        atomic_write_json(str(ws.documents), {"documents": documents})


def load_documents(ws: Workspace) -> list[dict[str, str]]:
    if not ws.documents.is_file():
        return []
    data = json.loads(ws.documents.read_text(encoding="utf-8"))
    return [dict(d) for d in data.get("documents", [])]
