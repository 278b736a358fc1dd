"""Which platform facts are too old to bet money or data on.

Billing and teardown rules change without notice; every fact record in a profile carries the
month it was last checked, and ``stale_facts`` lists those older than N months so a human
re-checks them before trusting ``down``. Age is counted in whole calendar months: a fact
verified in 2026-04 is 7 months old on any day of 2026-11.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict, dataclass
from datetime import date
from typing import Any

from rgt.profiles.loader import list_profiles
from rgt.profiles.profile import Profile

DEFAULT_MONTHS = 6


@dataclass(frozen=True)
class StaleFact:
    profile: str
    fact: str  # field path inside the profile, e.g. "clocks[stopped-auto-release]"
    verified: str
    age_months: int
    status: str
    source: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def month_age(verified: str, today: date) -> int:
    year, month = (int(part) for part in verified.split("-"))
    return (today.year - year) * 12 + (today.month - month)


def stale_facts(months: int = DEFAULT_MONTHS, today: date | None = None) -> list[StaleFact]:
    """Facts in every profile last verified more than ``months`` months before ``today``."""
    today = today or date.today()
    found = [fact for profile in list_profiles() for fact in profile_facts(profile, today)]
    return [fact for fact in found if fact.age_months > months]


def profile_facts(profile: Profile, today: date) -> list[StaleFact]:
    """Every stamped fact record of ``profile`` with its age on ``today``."""
    return [
        StaleFact(
            profile.name,
            where,
            rec["verified"],
            month_age(rec["verified"], today),
            rec["status"],
            rec["source"],
        )
        for where, rec in _records(profile.raw, "")
    ]


def _records(node: Any, where: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """(field path, record) for each table that carries its own ``verified`` stamp."""
    if isinstance(node, dict):
        if where and "verified" in node:
            yield where, node
        for key, value in node.items():
            yield from _records(value, f"{where}.{key}" if where else key)
    elif isinstance(node, list):
        for index, item in enumerate(node):
            label = item.get("name", index) if isinstance(item, dict) else index
            yield from _records(item, f"{where}[{label}]")
