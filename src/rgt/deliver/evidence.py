"""EVIDENCE.json (schema ``rgt.evidence/1``): each claim ties a sentence to the runs behind it.

A claim names a metric, the runs (ids, or a glob over recorded run ids), how to aggregate them
and how to print the result. Its value is never stored: it is computed from the recorded runs
every time, so it cannot go stale. ``keywords`` (optional) anchor copies of the number in
documents for reconcile; by default they come from the metric name (``val/acc`` →
"val/acc", "val acc", "validation accuracy", "acc", "accuracy": ``rgt.deliver.anchors``).
"""

from __future__ import annotations

import fnmatch
import json
from dataclasses import dataclass, field, replace
from functools import cache
from importlib import resources
from typing import Any

from rgt._fs import atomic_write_json
from rgt.deliver.anchors import metric_anchors
from rgt.deliver.numbers import NumberFormat
from rgt.deliver.runs import load_stored, stored_run_ids
from rgt.deliver.stats import Summary, summarize
from rgt.deliver.workspace import EVIDENCE_SCHEMA, Workspace
from rgt.errors import SpecError, UsageError


@dataclass(frozen=True)
class Claim:
    id: str
    text: str
    metric: str
    runs: tuple[str, ...] = ()
    run_glob: str | None = None
    aggregate: str = "mean"
    format: NumberFormat = field(default_factory=NumberFormat)
    figure: str | None = None
    keywords: tuple[str, ...] = ()
    appears_in: tuple[str, ...] = ()

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Claim:
        return cls(
            id=data["id"],
            text=data["text"],
            metric=data["metric"],
            runs=tuple(data.get("runs", ())),
            run_glob=data.get("run_glob"),
            aggregate=data.get("aggregate", "mean"),
            format=NumberFormat.from_json(data.get("format"), where=f"claims.{data['id']}.format"),
            figure=data.get("figure"),
            keywords=tuple(data.get("keywords", ())),
            appears_in=tuple(data.get("appears_in", ())),
        )

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"id": self.id, "text": self.text, "metric": self.metric}
        data.update({"runs": list(self.runs)} if self.runs else {"run_glob": self.run_glob})
        data.update(aggregate=self.aggregate, format=self.format.to_json())
        if self.figure:
            data["figure"] = self.figure
        if self.keywords:
            data["keywords"] = list(self.keywords)
        data["appears_in"] = list(self.appears_in)
        return data

    def anchors(self) -> tuple[str, ...]:
        """Lower-case words whose presence next to a number ties it to this claim."""
        if self.keywords:
            return tuple(k.lower() for k in self.keywords)
        return metric_anchors(self.metric)


@dataclass(frozen=True)
class ClaimValue:
    claim: Claim
    run_ids: tuple[str, ...]
    summary: Summary

    def printed(self, *, latex: bool = False) -> str:
        return self.claim.format.render(self.summary.value, latex=latex)


@cache
def evidence_schema() -> dict[str, Any]:
    text = resources.files("rgt").joinpath("schemas/evidence.schema.json").read_text("utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


def validate_evidence(data: Any, *, path: str) -> None:
    import jsonschema

    validator = jsonschema.Draft202012Validator(evidence_schema())
    error = jsonschema.exceptions.best_match(validator.iter_errors(data))
    if error is not None:
        where = ".".join(str(part) for part in error.absolute_path) or "<document>"
        raise SpecError(
            f"{path}: field {where!r}: {error.message}",
            path=path,
            field=where,
            fix="fix that field; the format is src/rgt/schemas/evidence.schema.json",
        )


def load_claims(ws: Workspace) -> list[Claim]:
    try:
        data = json.loads(ws.evidence.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SpecError(
            f"{ws.evidence}: cannot read ({exc})",
            path=str(ws.evidence),
            fix="restore EVIDENCE.json, or run `rgt deliver init` to create an empty one",
        ) from exc
    validate_evidence(data, path=str(ws.evidence))
    claims = [Claim.from_json(item) for item in data["claims"]]
    _unique([c.id for c in claims], str(ws.evidence))
    return claims


def _unique(ids: list[str], path: str) -> None:
    seen: set[str] = set()
    for claim_id in ids:
        if claim_id in seen:
            raise SpecError(
                f"{path}: claim id {claim_id!r} appears twice",
                path=path,
                field="claims.id",
                fix="give every claim its own id",
            )
        seen.add(claim_id)


def save_claims(ws: Workspace, claims: list[Claim]) -> None:
    data = {"schema": EVIDENCE_SCHEMA, "claims": [c.to_json() for c in claims]}
    validate_evidence(data, path=str(ws.evidence))
    atomic_write_json(str(ws.evidence), data)


def add_claim(ws: Workspace, claim: Claim, *, replace_existing: bool = False) -> Claim:
    """Add (or with ``replace_existing`` update) a claim; its value must compute now."""
    claims = load_claims(ws)
    if any(c.id == claim.id for c in claims) and not replace_existing:
        raise UsageError(
            f"claim {claim.id!r} already exists", fix="pick another id, or pass --replace"
        )
    claim_value(ws, claim)  # a claim that cites nothing real is refused at the door
    kept = [c for c in claims if c.id != claim.id]
    save_claims(ws, [*kept, claim])
    return claim


def get_claim(ws: Workspace, claim_id: str) -> Claim:
    claims = load_claims(ws)
    for claim in claims:
        if claim.id == claim_id:
            return claim
    known = ", ".join(c.id for c in claims) or "none"
    raise UsageError(
        f"no claim {claim_id!r} in {ws.evidence.name} (claims: {known})",
        fix="add it with `rgt deliver claim add`, or fix the id",
    )


def resolve_runs(ws: Workspace, claim: Claim) -> tuple[str, ...]:
    if claim.runs:
        return claim.runs
    pattern = claim.run_glob or ""
    matched = tuple(r for r in stored_run_ids(ws) if fnmatch.fnmatchcase(r, pattern))
    if not matched:
        raise UsageError(
            f"claim {claim.id!r}: run glob {pattern!r} matches no recorded run",
            fix="record the runs first (`rgt deliver record`), or fix the glob",
        )
    return matched


def claim_value(ws: Workspace, claim: Claim) -> ClaimValue:
    run_ids = resolve_runs(ws, claim)
    values = [load_stored(ws, run_id).metric(claim.metric).value for run_id in run_ids]
    return ClaimValue(claim, run_ids, summarize(values, claim.aggregate))


def with_appearances(claim: Claim, places: list[str]) -> Claim:
    return replace(claim, appears_in=tuple(sorted(set(places))))
