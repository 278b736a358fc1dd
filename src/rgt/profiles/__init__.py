"""Platform profiles as data: one TOML file per platform, a JSON Schema, a loader.

    from rgt.profiles import load_profile, list_profiles, stale_facts
    p = load_profile("autodl")        # $RGT_HOME/profiles/autodl.toml wins over the bundled one
    p.durable_dir, p.clocks, p.meter_stop, p.teardown_notes()

Stdlib only at import; ``jsonschema`` is imported when a profile is validated.
"""

from rgt.profiles.loader import list_profiles, load_profile, profile_names, user_profile_dir
from rgt.profiles.profile import (
    Clock,
    Detach,
    MeterStop,
    Profile,
    Spot,
    Stamp,
    StorageTier,
    survival_word,
)
from rgt.profiles.stale import DEFAULT_MONTHS, StaleFact, stale_facts

__all__ = [
    "DEFAULT_MONTHS",
    "Clock",
    "Detach",
    "MeterStop",
    "Profile",
    "Spot",
    "StaleFact",
    "Stamp",
    "StorageTier",
    "list_profiles",
    "load_profile",
    "profile_names",
    "stale_facts",
    "survival_word",
    "user_profile_dir",
]
