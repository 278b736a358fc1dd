"""The hostile names every writer of a remote-chosen name is tried with, and the area around a
destination that must stay untouched.

The area: ``victim/precious.txt`` (what an escape would overwrite or sit beside) and the
destination two levels down, ``one/two/dest``, so ``../../x`` and ``a/../../x`` land inside the
area (where the snapshot sees them) instead of somewhere on this machine. The absolute name
points into the area for the same reason. ``symlinked-parent`` plants ``dest/sub`` as a link to
the victim directory and names ``sub/x``.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

PRECIOUS = b"precious\n"


@dataclass(frozen=True)
class Hostile:
    id: str
    make: Callable[[Path], str]  # the area -> the name the remote answers
    plant: bool = False  # dest/sub -> area/victim first


NAMES = (
    Hostile("dotdot", lambda area: "../../x"),
    Hostile("absolute", lambda area: f"{area}/abs/x"),
    Hostile("inner-dotdot", lambda area: "a/../../x"),
    Hostile("nul", lambda area: "x\x00y"),
    Hostile("backslash", lambda area: "..\\..\\x"),
    Hostile("drive", lambda area: "C:x"),
    Hostile("empty-part", lambda area: "a//x"),
    Hostile("symlinked-parent", lambda area: "sub/x", plant=True),
)
IDS = [n.id for n in NAMES]


@dataclass(frozen=True)
class Area:
    root: Path

    @property
    def dest(self) -> Path:
        return self.root / "one" / "two" / "dest"

    @property
    def victim(self) -> Path:
        return self.root / "victim"


def make_area(base: Path, hostile: Hostile) -> Area:
    area = Area(base / f"area-{hostile.id}")
    area.victim.mkdir(parents=True)
    (area.victim / "precious.txt").write_bytes(PRECIOUS)
    area.dest.parent.mkdir(parents=True)
    if hostile.plant:
        area.dest.mkdir()
        (area.dest / "sub").symlink_to(area.victim)
    return area


def snapshot(area: Area) -> dict[str, str]:
    """Every entry of the area outside the destination: its kind and its bytes' hash."""
    seen: dict[str, str] = {}
    for top, dirs, files in os.walk(area.root):
        if Path(top) == area.dest:
            dirs[:] = []
            continue
        for name in dirs + files:
            path = Path(top) / name
            if path == area.dest:
                continue
            rel = str(path.relative_to(area.root))
            if path.is_symlink():
                seen[rel] = "link " + os.readlink(path)
            elif path.is_file():
                seen[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
            else:
                seen[rel] = "dir"
    return seen


def outside(before: dict[str, str], area: Area) -> list[str]:
    """What changed outside the destination since ``before`` (the files written out of it)."""
    after = snapshot(area)
    return sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
