"""User profiles in $RGT_HOME/profiles: they win over bundled ones, and bad ones are named."""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

import pytest

from rgt.errors import SpecError, UsageError
from rgt.profiles import list_profiles, load_profile


def bundled_text(name: str) -> str:
    return resources.files("rgt.profiles").joinpath(f"{name}.toml").read_text(encoding="utf-8")


def write_user(home: Path, name: str, text: str) -> Path:
    folder = home / "profiles"
    folder.mkdir(exist_ok=True)
    path = folder / f"{name}.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_user_file_overrides_bundled_and_says_so(rgt_home: Path) -> None:
    text = bundled_text("autodl").replace(
        'DURABLE_DIR = "/root/autodl-tmp"', 'DURABLE_DIR = "/root/autodl-fs"'
    )
    path = write_user(rgt_home, "autodl", text)
    profile = load_profile("autodl")
    assert profile.origin == "user" and profile.overrides_bundled
    assert profile.path == str(path) and profile.durable_dir == "/root/autodl-fs"
    assert str(path) in profile.first_contact_notes()[0]
    assert "overrides the bundled" in profile.teardown_notes()[0]
    listed = {p.name: p for p in list_profiles()}
    assert listed["autodl"].origin == "user" and listed["runpod"].origin == "bundled"


def test_new_user_profile_under_a_hostile_home(
    hostile_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RGT_HOME", str(hostile_dir))
    text = bundled_text("generic-ssh").replace('name = "generic-ssh"', 'name = "lab-box"')
    path = write_user(hostile_dir, "lab-box", text)
    profile = load_profile("lab-box")
    assert profile.origin == "user" and not profile.overrides_bundled
    assert profile.path == str(path)
    assert profile.first_contact_notes()[0] == f"using your profile file {path}"
    assert "lab-box" in {p.name for p in list_profiles()}


def test_unknown_name_lists_the_known_ones() -> None:
    with pytest.raises(UsageError) as caught:
        load_profile("autodll")
    assert "autodl" in caught.value.message and "vastai" in caught.value.message
    assert caught.value.exit_code == 2


@pytest.mark.parametrize("name", ["../autodl", "AutoDL", "a b", ""])
def test_names_that_are_not_profile_names_are_refused(name: str) -> None:
    with pytest.raises(UsageError):
        load_profile(name)


# (edit applied to the AutoDL text, field the error must name, words the error must contain)
MALFORMED = [
    ('backend = "ssh"\n', "", "backend", ["is missing", "'ssh'", "'autodl'"]),
    ('kind = "ssh-rental"', 'kind = "rental"', "kind", ["'rental'", "'ssh-rental'", "'notebook'"]),
    (
        "survives_stop = true",
        'survives_stop = "yes"',
        "storage[0].survives_stop",
        ["wrong type", "boolean", "'unknown'"],
    ),
    (
        "irreversible = false",
        "irreversible = 0",
        "meter_stop.irreversible",
        ["wrong type", "boolean"],
    ),
    ('verified = "2026-06"', 'verified = "June 2026"', "storage[0].verified", ["YYYY-MM"]),
    ('verified = "2026-06"', 'verified = "2026-13"', "storage[0].verified", ["YYYY-MM"]),
    ("'^ssh", "'^ssh(", "network.ssh.patterns[0]", ["regular expression"]),
    ('primitive = "tmux"', 'primitive = "nohup"', "detach.primitive", ["'setsid'", "'k8s-job'"]),
    (
        'name = "stopped-auto-release"\nwhen = "stopped"',
        'name = "stopped-auto-release"\nwhen = "later"',
        "clocks[0].when",
        ["'later'", "'stopped'"],
    ),
    (
        'status = "unverified"\nsource = "R:autodl"\nnote = "a single field note from 2026-07, '
        'not documented by AutoDL"',
        'status = "unverified"\nsource = "R:autodl"',
        "clocks[3].note",
        ["is missing", "unverified or conflict"],
    ),
    (
        'speed = "local SSD"',
        'speed = "local SSD"\nsped = "typo"',
        "storage[0].sped",
        ["not a known field", "survives_stop"],
    ),
    ('name = "autodl"', 'name = "autodl2"', "name", ["autodl.toml"]),
]


@pytest.mark.parametrize(("old", "new", "field", "words"), MALFORMED)
def test_malformed_user_profile_names_file_field_and_what_is_allowed(
    rgt_home: Path, old: str, new: str, field: str, words: list[str]
) -> None:
    text = bundled_text("autodl")
    assert old in text
    path = write_user(rgt_home, "autodl", text.replace(old, new, 1))
    with pytest.raises(SpecError) as caught:
        load_profile("autodl")
    error = caught.value
    assert error.path == str(path) and error.field == field
    told = f"{error.message} {error.fix}"
    assert str(path) in error.message and field in error.message
    for word in words:
        assert word in told, told


def test_toml_syntax_error_names_the_file(rgt_home: Path) -> None:
    path = write_user(rgt_home, "autodl", bundled_text("autodl") + "\n[dirs\n")
    with pytest.raises(SpecError) as caught:
        load_profile("autodl")
    assert caught.value.path == str(path) and "not valid TOML" in caught.value.message


def test_a_broken_user_file_breaks_the_listing_loudly(rgt_home: Path) -> None:
    write_user(rgt_home, "mine", 'name = "mine"\n')
    with pytest.raises(SpecError) as caught:
        list_profiles()
    assert caught.value.path is not None and os.path.basename(caught.value.path) == "mine.toml"
