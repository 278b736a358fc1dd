"""rgt._confine, the one check of every name chosen outside rgt: what it refuses, and that a
write through a held directory cannot be redirected by a link swapped in afterwards."""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest

from rgt import _confine
from rgt._confine import confined, safe_name, within
from rgt.errors import UnsafeNameError, VerifyError

REFUSED = {
    "../x": "'..'",
    "a/../../x": "'..'",
    "/etc/passwd": "absolute",
    "x\x00y": "NUL",
    "a\\b": "backslash",
    "..\\..\\x": "backslash",
    "C:x": "drive",
    "c:/x": "drive",
    "a//b": "empty",
    "a/": "empty",
    "./a": "'.'",
    "": "empty",
    "a\nb": "control",
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_names_that_are_refused(name: str) -> None:
    with pytest.raises(UnsafeNameError, match=REFUSED[name]) as refused:
        safe_name(name, dest="/d")
    assert isinstance(refused.value, VerifyError) and refused.value.fix


@pytest.mark.parametrize("name", ["a", "a/b.c", "..a", "a..", "a b/ü数据", ".hidden/x", "ab:c"])
def test_plain_names_pass(name: str) -> None:
    assert safe_name(name) == name


def test_a_name_that_is_not_text_is_refused() -> None:
    for name in (None, 3, ["a"]):
        with pytest.raises(UnsafeNameError, match="not a text name"):
            safe_name(name)


def test_a_link_on_the_way_or_at_the_name_is_refused(tmp_path: Path) -> None:
    dest, victim = tmp_path / "dest", tmp_path / "victim"
    dest.mkdir()
    victim.mkdir()
    (dest / "sub").symlink_to(victim)
    (dest / "leaf").symlink_to(victim / "file")
    with pytest.raises(UnsafeNameError, match=r"sub in .* is a symbolic link; not followed"):
        confined(str(dest), "sub/x")
    with pytest.raises(UnsafeNameError, match="is a symbolic link; not written through"):
        confined(str(dest), "leaf")
    place, leaf = within(str(dest), "leaf")
    with place, pytest.raises(OSError):  # O_NOFOLLOW at the leaf
        place.open(leaf, "wb")
    assert list(victim.iterdir()) == []


def test_a_link_swapped_in_after_the_walk_does_not_redirect_the_write(tmp_path: Path) -> None:
    """The race: the directory is held by descriptor; renaming it away and planting a link
    with its name (what a hostile job on the machine could do mid-download) changes nothing
    for the writer: the file lands in the directory it walked, never in the victim."""
    dest, victim = tmp_path / "dest", tmp_path / "victim"
    dest.mkdir()
    victim.mkdir()
    place, leaf = within(str(dest), "sub/x.bin")
    (dest / "sub").rename(dest / "sub-was")
    (dest / "sub").symlink_to(victim)
    with place:
        with place.open(leaf + ".part", "wb") as out:
            out.write(b"data")
        place.replace(leaf + ".part", leaf)
    assert list(victim.iterdir()) == []
    assert (dest / "sub-was" / "x.bin").read_bytes() == b"data"


def test_it_parses_on_python_38() -> None:
    """The fetch downloader ships it to the machine, whose Python may be 3.8."""
    source = Path(_confine.__file__).read_text()
    ast.parse(source, feature_version=(3, 8))
    assert os.path.basename(_confine.__file__) == "_confine.py"
