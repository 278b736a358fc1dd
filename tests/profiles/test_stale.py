"""``stale_facts``: which stamps are older than N whole calendar months on a fixed day."""

from __future__ import annotations

from datetime import date
from importlib import resources
from pathlib import Path

import pytest

from rgt.profiles import stale_facts
from rgt.profiles.stale import month_age


@pytest.mark.parametrize(
    ("verified", "today", "age"),
    [
        ("2026-04", date(2026, 11, 29), 7),
        ("2026-04", date(2026, 10, 1), 6),
        ("2025-12", date(2026, 1, 31), 1),
        ("2026-08", date(2026, 8, 1), 0),
    ],
)
def test_month_age_counts_calendar_months(verified: str, today: date, age: int) -> None:
    assert month_age(verified, today) == age


def test_six_months_on_2026_11_29_flags_only_runpods_spot_record() -> None:
    stale = stale_facts(6, today=date(2026, 11, 29))
    assert [(f.profile, f.fact, f.verified, f.age_months) for f in stale] == [
        ("runpod", "spot", "2026-04", 7)
    ]


def test_older_than_means_strictly_older() -> None:
    assert stale_facts(6, today=date(2026, 10, 31)) == []
    assert stale_facts(6, today=date(2026, 11, 1))


def test_fewer_months_flag_more_facts_with_field_paths() -> None:
    stale = stale_facts(3, today=date(2026, 10, 15))
    keys = {(f.profile, f.fact) for f in stale}
    assert ("autodl", "clocks[stopped-auto-release]") in keys
    assert ("autodl", "storage[data]") in keys
    assert ("autodl", "dirs") not in keys  # verified 2026-08: 2 months old
    assert all(f.age_months > 3 for f in stale)
    assert stale_facts(0, today=date(2026, 8, 31)) == stale_facts(0, today=date(2026, 8, 1))


def test_user_profiles_are_checked_too(rgt_home: Path) -> None:
    text = resources.files("rgt.profiles").joinpath("local.toml").read_text(encoding="utf-8")
    text = text.replace('name = "local"', 'name = "old-box"').replace(
        'name = "reboot-kills-runs"\nwhen = "running"\ntrigger = "a reboot or shutdown"\n'
        'duration = "immediate"\nconsequence = "detached runs die; they resume only from '
        'their last checkpoint"\nverified = "2026-08"',
        'name = "reboot-kills-runs"\nwhen = "running"\ntrigger = "a reboot or shutdown"\n'
        'duration = "immediate"\nconsequence = "detached runs die; they resume only from '
        'their last checkpoint"\nverified = "2024-01"',
    )
    (rgt_home / "profiles").mkdir()
    (rgt_home / "profiles" / "old-box.toml").write_text(text, encoding="utf-8")
    stale = stale_facts(6, today=date(2026, 11, 29))
    mine = [f for f in stale if f.profile == "old-box"]
    assert [(f.fact, f.verified, f.age_months) for f in mine] == [
        ("clocks[reboot-kills-runs]", "2024-01", 34)
    ]
