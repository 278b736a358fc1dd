"""A tool's input schema from its function's type hints, and the check of a call's arguments.

The tools take only what JSON carries: ``str``, ``int``, ``float``, ``bool``, ``list[str]``,
``dict[str, str]`` and ``X | None``. The schema is the one the SDK's pydantic models wrote
(``anyOf`` with ``null`` for an optional, ``title`` and ``default`` per property), plus
``additionalProperties: false``: a misspelt parameter is an error the model can correct, never
silently dropped. ``check`` applies the same lax coercions pydantic did (``3.0`` is the integer
3, ``"2.5"`` the number 2.5) and nothing more.
"""

from __future__ import annotations

import inspect
import math
import types
import typing
from collections.abc import Callable
from typing import Any

JSON_TYPES: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}


class BadArguments(ValueError):
    """The arguments do not fit the tool's input schema; the message says which and why."""


def input_schema(fn: Callable[..., Any]) -> dict[str, Any]:
    hints = typing.get_type_hints(fn)
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, param in inspect.signature(fn).parameters.items():
        prop = {**_type_schema(hints[name]), "title": name.replace("_", " ").title()}
        if param.default is inspect.Parameter.empty:
            required.append(name)
        else:
            prop["default"] = param.default
        properties[name] = prop
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return {**schema, "additionalProperties": False, "title": f"{fn.__name__}Arguments"}


def _type_schema(hint: Any) -> dict[str, Any]:
    args = typing.get_args(hint)
    if _is_union(hint):
        return {"anyOf": [_type_schema(a) for a in args]}
    if hint is type(None):
        return {"type": "null"}
    origin = typing.get_origin(hint)
    if origin is list:
        return {"type": "array", "items": _type_schema(args[0])}
    if origin is dict:
        return {"type": "object", "additionalProperties": _type_schema(args[1])}
    if hint in JSON_TYPES:
        return {"type": JSON_TYPES[hint]}
    raise TypeError(f"a tool parameter of type {hint!r} has no JSON schema here")


def _is_union(hint: Any) -> bool:
    return typing.get_origin(hint) is typing.Union or isinstance(hint, types.UnionType)


def check(schema: dict[str, Any], arguments: object) -> dict[str, Any]:
    """The arguments, coerced to the schema's types, or ``BadArguments`` naming each fault."""
    if not isinstance(arguments, dict):
        raise BadArguments("arguments must be a JSON object")
    properties = schema["properties"]
    faults = [f"{k}: missing (required)" for k in schema.get("required", []) if k not in arguments]
    unknown = sorted(set(arguments) - set(properties))
    if unknown:
        accepted = ", ".join(properties)
        faults.append(f"unknown parameter(s) {', '.join(unknown)}; accepted: {accepted}")
    values: dict[str, Any] = {}
    for name, value in arguments.items():
        if name in properties:
            try:
                values[name] = _coerce(properties[name], value)
            except BadArguments as exc:
                faults.append(f"{name}: {exc}")
    if faults:
        raise BadArguments("; ".join(faults))
    return values


def _coerce(schema: dict[str, Any], value: object) -> Any:
    if "anyOf" in schema:
        for option in schema["anyOf"]:
            try:
                return _coerce(option, value)
            except BadArguments:
                continue
        kinds = " or ".join(o["type"] for o in schema["anyOf"])
        raise BadArguments(f"expected {kinds}, got {_shown(value)}")
    kind = schema["type"]
    if kind == "array" and isinstance(value, list):
        return [_coerce(schema["items"], item) for item in value]
    if kind == "object" and isinstance(value, dict):
        return {str(k): _coerce(schema["additionalProperties"], v) for k, v in value.items()}
    return _scalar(kind, value)


def _scalar(kind: str, value: object) -> Any:
    if kind == "null" and value is None:
        return None
    if kind == "string" and isinstance(value, str):
        return value
    if kind == "boolean" and isinstance(value, bool):
        return value
    if kind in ("integer", "number") and isinstance(value, int) and not isinstance(value, bool):
        return value
    if kind in ("integer", "number") and not isinstance(value, bool):
        number = _number(value)
        if kind == "number" and number is not None:
            return number
        if number is not None and number == int(number):
            return int(number)
    raise BadArguments(f"expected {kind}, got {_shown(value)}")


def _number(value: object) -> float | None:
    if isinstance(value, (int, float)):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            return None
    else:
        return None
    return number if math.isfinite(number) else None


def _shown(value: object) -> str:
    kind = {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}.get(
        type(value), type(value).__name__
    )
    return "null" if value is None else kind
