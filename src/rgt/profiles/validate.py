"""Checking a profile document: the JSON Schema, then what a schema cannot say.

Every problem becomes a :class:`~rgt.errors.SpecError` that names the file, the field path
(``storage[1].survives_stop``) and what is allowed there, so a user who wrote their own profile
can fix it without reading the schema. ``jsonschema`` is imported lazily: ``rgt --help`` must
stay light.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Sequence
from importlib import resources
from typing import Any

from rgt.errors import SpecError

SCHEMA_FILE = "profile.schema.json"


@functools.cache
def profile_schema() -> dict[str, Any]:
    text = (
        resources.files("rgt").joinpath("schemas").joinpath(SCHEMA_FILE).read_text(encoding="utf-8")
    )
    schema: dict[str, Any] = json.loads(text)
    return schema


@functools.cache
def _validator() -> Any:
    from jsonschema import Draft202012Validator

    return Draft202012Validator(profile_schema())


_VALID: set[str] = set()  # documents already found valid in this process (same text, same verdict)


def validate_profile(doc: dict[str, Any], *, path: str, stem: str) -> None:
    """Raise SpecError for the first problem in ``doc`` (read from ``path``)."""
    seen = json.dumps([path, stem, doc], sort_keys=True, default=str)
    if seen in _VALID:
        return
    errors = sorted(_validator().iter_errors(doc), key=lambda e: (len(e.absolute_path), e.message))
    if errors:
        raise _spec_error(errors[0], path=path, others=len(errors) - 1)
    if doc["name"] != stem:
        raise SpecError(
            f"{path}: field 'name' is {doc['name']!r} but the file is {stem}.toml",
            path=path,
            field="name",
            fix=f"set name = {stem!r} or rename the file",
        )
    _check_patterns(doc, path)
    _VALID.add(seen)


def field_path(parts: Iterable[Any]) -> str:
    """``["storage", 1, "path"]`` -> ``storage[1].path``."""
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def _spec_error(error: Any, *, path: str, others: int) -> SpecError:
    where = list(error.absolute_path)
    what, allowed = _explain(error, where)
    field = field_path(where)
    more = f" (and {others} more problem{'s' * (others > 1)})" if others else ""
    return SpecError(
        f"{path}: field {field}: {what}{more}", path=path, field=field, fix=f"allowed: {allowed}"
    )


def _explain(error: Any, where: list[Any]) -> tuple[str, str]:
    """What is wrong, and what is allowed. ``where`` is extended in place to the bad key."""
    kind, value, schema = error.validator, error.validator_value, error.schema
    if kind == "required":
        missing = [key for key in value if key not in error.instance]
        where.append(missing[0])
        if missing[0] == "note":
            return "is missing", "text saying why (needed when status is unverified or conflict)"
        return "is missing", _describe(schema.get("properties", {}).get(missing[0], {}))
    if kind == "additionalProperties":
        extra = sorted(set(error.instance) - set(schema.get("properties", {})))
        where.append(extra[0])
        return "is not a known field", ", ".join(sorted(schema.get("properties", {})))
    if kind == "enum":
        return f"{error.instance!r} is not allowed", " | ".join(map(repr, value))
    if kind == "pattern":
        return f"{error.instance!r} has the wrong form", _describe(schema)
    if kind in ("type", "oneOf"):
        return f"{error.instance!r} has the wrong type", _describe(schema)
    return error.message, _describe(schema)


def _describe(schema: dict[str, Any]) -> str:
    """A short human description of what a schema node accepts."""
    schema = _resolve(schema)
    if "enum" in schema:
        return " | ".join(map(repr, schema["enum"]))
    if "oneOf" in schema:
        return " or ".join(_describe(option) for option in schema["oneOf"])
    if "pattern" in schema:
        hint = schema.get("description") or f"text matching {schema['pattern']}"
        return str(hint)
    if "type" in schema:
        return f"a {schema['type']}"
    return "see rgt/schemas/profile.schema.json"


def _resolve(schema: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref", "")
    if ref.startswith("#/$defs/"):
        resolved: dict[str, Any] = profile_schema()["$defs"][ref.removeprefix("#/$defs/")]
        return resolved
    return schema


def _check_patterns(doc: dict[str, Any], path: str) -> None:
    """Each ssh-line pattern must compile; a broken regex would silently never match."""
    patterns: Sequence[str] = doc["network"]["ssh"]["patterns"]
    for index, text in enumerate(patterns):
        try:
            re.compile(text)
        except re.error as exc:
            field = f"network.ssh.patterns[{index}]"
            raise SpecError(
                f"{path}: field {field}: not a valid regular expression ({exc})",
                path=path,
                field=field,
                fix="allowed: a Python regular expression; escape literal dots and brackets",
            ) from exc
