"""Finding, reading and building profiles.

Bundled profiles ship as ``rgt/profiles/<name>.toml``; a user's own ``$RGT_HOME/profiles/
<name>.toml`` wins over a bundled one of the same name, and the loaded profile says so
(``origin = "user"``, ``overrides_bundled``), because a stale private copy of a platform's facts
is exactly how a "stop" that still bills slips through.
"""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path
from typing import Any

from rgt.config import TOMLDecodeError, loads_toml, rgt_home
from rgt.errors import SpecError, UsageError
from rgt.profiles.profile import (
    Clock,
    Detach,
    MeterStop,
    Profile,
    Spot,
    Stamp,
    StorageTier,
)
from rgt.profiles.validate import validate_profile

SUFFIX = ".toml"
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,39}\Z")


def user_profile_dir() -> Path:
    return rgt_home() / "profiles"


def bundled_names() -> list[str]:
    root = resources.files("rgt.profiles")
    return sorted(
        e.name.removesuffix(SUFFIX)
        for e in root.iterdir()
        if e.name.endswith(SUFFIX) and not e.name.startswith("_")
    )


def user_names() -> list[str]:
    folder = user_profile_dir()
    if not folder.is_dir():
        return []
    return sorted(p.stem for p in folder.glob(f"*{SUFFIX}") if not p.name.startswith("_"))


def profile_names() -> list[str]:
    return sorted(set(bundled_names()) | set(user_names()))


def load_profile(name: str) -> Profile:
    """The profile called ``name``: the user's file if there is one, else the bundled one."""
    if not NAME_RE.match(name):
        raise UsageError(
            f"{name!r} is not a profile name (known: {', '.join(profile_names())})",
            fix="use lower-case letters, digits and '-', e.g. `autodl`",
        )
    user_file = user_profile_dir() / f"{name}{SUFFIX}"
    bundled = name in bundled_names()
    if name in user_names():
        return _build(
            _read(user_file.read_bytes(), str(user_file)),
            str(user_file),
            origin="user",
            overrides=bundled,
        )
    if not bundled:
        raise UsageError(
            f"no profile named {name!r} (known: {', '.join(profile_names())})",
            fix=f"pick one of those, or write {user_file}",
        )
    entry = resources.files("rgt.profiles").joinpath(f"{name}{SUFFIX}")
    return _build(_read(entry.read_bytes(), str(entry)), str(entry), origin="bundled")


def list_profiles() -> list[Profile]:
    """Every profile, user files winning; a malformed user file raises SpecError."""
    return [load_profile(name) for name in profile_names()]


def _read(data: bytes, path: str) -> dict[str, Any]:
    try:
        doc: dict[str, Any] = loads_toml(data.decode("utf-8"))
    except (TOMLDecodeError, UnicodeDecodeError) as exc:
        raise SpecError(
            f"{path}: not valid TOML ({exc})",
            path=path,
            fix="fix the TOML syntax (https://toml.io)",
        ) from exc
    return doc


def _build(doc: dict[str, Any], path: str, *, origin: str, overrides: bool = False) -> Profile:
    validate_profile(doc, path=path, stem=Path(path).stem)
    ssh = doc["network"]["ssh"]
    return Profile(
        name=doc["name"],
        title=doc["title"],
        kind=doc["kind"],
        backend=doc["backend"],
        verified=doc["verified"],
        storage=tuple(_tier(t) for t in doc["storage"]),
        clocks=tuple(_clock(c) for c in doc["clocks"]),
        meter_stop=_meter_stop(doc["meter_stop"]),
        detach=Detach(
            doc["detach"]["primitive"], doc["detach"]["survives_restart"], _stamp(doc["detach"])
        ),
        spot=_spot(doc["spot"]),
        ssh_patterns=tuple(re.compile(p) for p in ssh["patterns"]),
        conveniences=tuple(c["text"] for c in doc["conveniences"]),
        dirs={k: v for k, v in doc["dirs"].items() if k.isupper()},
        raw=doc,
        path=path,
        origin=origin,
        overrides_bundled=overrides,
    )


def _stamp(record: dict[str, Any]) -> Stamp:
    return Stamp(record["verified"], record["status"], record["source"], record.get("note"))


def _tier(t: dict[str, Any]) -> StorageTier:
    return StorageTier(
        t["name"],
        t["path"],
        t["speed"],
        t["size_cap"],
        t.get("inode_cap"),
        t["survives_stop"],
        t["survives_destroy"],
        t["bills_when_stopped"],
        _stamp(t),
    )


def _clock(c: dict[str, Any]) -> Clock:
    return Clock(
        c["name"],
        c["when"],
        c["trigger"],
        c["duration"],
        c["consequence"],
        _stamp(c),
        c.get("duration_s"),
    )


def _meter_stop(m: dict[str, Any]) -> MeterStop:
    return MeterStop(
        m["action"],
        m["irreversible"],
        m["command"],
        tuple(m["still_bills"]),
        m.get("destroy"),
        _stamp(m),
    )


def _spot(s: dict[str, Any]) -> Spot:
    return Spot(s["available"], s.get("grace_s"), s.get("signal"), _stamp(s))
