"""How a claimed number is printed, and whether a number found in a document is a copy of it.

A value of 0.8734 may be printed 0.8734, 0.873, .87, 87.34 %, 87.3 or 87 %: a found number is a
copy when it equals the value rounded (half-up, half-even) or truncated to the found number's own
decimals, at the value's scale or, for values in [-1, 1], at percent scale. Integers without a
percent sign are never treated as copies or drifts: near a metric name they are table numbers,
epochs, counts.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import ROUND_DOWN, ROUND_HALF_EVEN, ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any

from rgt.errors import SpecError

_ROUNDINGS = (ROUND_HALF_UP, ROUND_HALF_EVEN, ROUND_DOWN)


@dataclass(frozen=True)
class NumberFormat:
    digits: int = 4  # decimals printed
    percent: bool = False  # print value × 100 followed by a percent sign

    @classmethod
    def from_json(cls, data: Any, *, where: str = "format") -> NumberFormat:
        if data is None:
            return cls()
        if not isinstance(data, dict):
            raise SpecError(f"{where} must be an object like {{'digits': 2}}", field=where)
        digits, percent = data.get("digits", 4), data.get("percent", False)
        if not isinstance(digits, int) or isinstance(digits, bool) or not 0 <= digits <= 12:
            raise SpecError(f"{where}.digits must be an integer 0..12", field=f"{where}.digits")
        if not isinstance(percent, bool):
            raise SpecError(f"{where}.percent must be true or false", field=f"{where}.percent")
        return cls(digits, percent)

    def to_json(self) -> dict[str, Any]:
        return {"digits": self.digits, "percent": self.percent}

    def render(self, value: float, *, latex: bool = False) -> str:
        scaled = Decimal(repr(value)) * (100 if self.percent else 1)
        text = str(scaled.quantize(Decimal(1).scaleb(-self.digits), rounding=ROUND_HALF_UP))
        if self.percent:
            return text + (r"\%" if latex else "%")
        return text


@dataclass(frozen=True)
class Found:
    """A number as printed in a document."""

    text: str  # the digits as written, e.g. ".873" or "87.3"
    percent: bool  # followed by a percent sign

    @property
    def decimals(self) -> int:
        return len(self.text.split(".", 1)[1]) if "." in self.text else 0

    @property
    def value(self) -> Decimal:
        return Decimal(self.text)

    @property
    def comparable(self) -> bool:
        """Only numbers printed like a measurement (a decimal point or a percent sign) count."""
        return self.percent or "." in self.text


def scales(value: float, found: Found, percent: bool = True) -> tuple[int, ...]:
    """Scales at which ``found`` may print ``value``: ×100 needs a percent sign, or a claim
    printed as a percentage (then "87.3" in a table column of accuracies is a percentage)."""
    if found.percent:
        return (100,) if abs(value) <= 1 else ()
    return (1, 100) if abs(value) <= 1 and percent else (1,)


def is_copy(value: float, found: Found, percent: bool = True) -> bool:
    """Is ``found`` the value as someone would print it (any rounding, either scale)?"""
    if not found.comparable:
        return False
    try:
        exact = Decimal(repr(value))
        target = found.value.copy_abs()
        step = Decimal(1).scaleb(-found.decimals)
        return any(
            (exact * scale).copy_abs().quantize(step, rounding=rounding) == target
            for scale in scales(value, found, percent)
            for rounding in _ROUNDINGS
        )
    except InvalidOperation:
        return False


def is_near(value: float, found: Found, tolerance: float, percent: bool = True) -> bool:
    """A plausible stale copy: same scale, within ``tolerance`` (relative) of the value."""
    if not found.comparable:
        return False
    for scale in scales(value, found, percent):
        if scale == 1 and abs(value) <= 1 and abs(found.value) > 1:
            continue
        seen = float(found.value.copy_abs()) / scale
        if abs(seen - abs(value)) <= tolerance * max(abs(value), 1e-12):
            return True
    return False
