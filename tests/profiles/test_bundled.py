"""The bundled profiles: every one validates, and the facts that cost money or data are there."""

from __future__ import annotations

import pytest

from rgt.profiles import Clock, Profile, list_profiles, load_profile, profile_names
from rgt.profiles.loader import bundled_names

PLATFORMS = {
    "local",
    "autodl",
    "runpod",
    "vastai",
    "lambda",
    "paperspace",
    "gpushare",
    "matpool",
    "featurize",
    "lanrui",
    "generic-ssh",
    "slurm",
    "kubernetes",
    "colab",
    "kaggle",
}

# Section 14 of platform-facts.md: (profile, clock name, verified month, text in its duration).
KEY_CLOCKS = [
    ("autodl", "stopped-auto-release", "2026-06", "15 days"),
    ("autodl", "stopped-disk-billing", "2026-06", "until released"),
    ("autodl", "arrears-force-stop", "2026-08", "balance"),
    ("autodl", "nohup-gateway-kill", "2026-07", "hours"),
    ("runpod", "stopped-volume-billing", "2026-08", "until terminated"),
    ("runpod", "low-balance-deletion", "2026-08", "deletion"),
    ("runpod", "stale-stopped-removal", "2026-06", "30 days"),
    ("runpod", "spot-grace", "2026-08", "5 s"),
    ("vastai", "stopped-disk-billing", "2026-06", "forever"),
    ("vastai", "bandwidth-billing", "2026-06", "every state"),
    ("vastai", "contract-end", "2026-08", "host"),
    ("vastai", "zero-balance-deletion", "2026-08", "grace"),
    ("vastai", "outbid-pause", "2026-08", "0 s"),
    ("lambda", "in-os-shutdown-bills", "2026-06", "until terminated"),
    ("lambda", "orphan-filesystem", "2026-06", "until deleted"),
    ("paperspace", "auto-shutdown", "2026-06", "1 hour to 1 week"),
    ("paperspace", "stopped-billing", "2026-06", "until destroyed"),
    ("gpushare", "hy-tmp-wipe", "2026-08", "24 hours"),
    ("gpushare", "stopped-auto-release", "2026-06", "10 days"),
    ("gpushare", "arrears-purge", "2026-06", "day 15"),
    ("featurize", "return-wipes", "2026-06", "immediate"),
    ("lanrui", "stopped-datadisk-billing", "2026-06", "destroyed"),
    ("matpool", "snap-fills-netdisk", "2026-06", "snapshots"),
    ("generic-ssh", "forgotten-box", "2026-08", "24/7"),
    ("slurm", "walltime", "2026-06", "30 s"),
    ("kubernetes", "termination-grace", "2026-06", "30 s"),
    ("kubernetes", "nodes-bill-after-delete", "2026-08", "scales down"),
    ("colab", "idle-disconnect", "2026-06", "90 min"),
    ("colab", "vm-lifetime", "2026-06", "12 h"),
    ("kaggle", "weekly-gpu-quota", "2026-06", "30 h per week"),
    ("kaggle", "run-time-cap", "2026-08", "9 h"),
]


def _clock(profile: Profile, name: str) -> Clock:
    found = [c for c in profile.clocks if c.name == name]
    assert found, f"{profile.name} has no clock {name!r}: {[c.name for c in profile.clocks]}"
    return found[0]


def test_every_platform_ships_a_profile() -> None:
    assert set(bundled_names()) == PLATFORMS
    assert set(profile_names()) == PLATFORMS


@pytest.mark.parametrize("name", sorted(PLATFORMS))
def test_bundled_profile_validates_and_builds(name: str) -> None:
    profile = load_profile(name)
    assert profile.name == name
    assert profile.origin == "bundled" and not profile.overrides_bundled
    assert profile.storage and profile.meter_stop.command
    assert profile.durable_dir.startswith(("/", "~"))
    assert profile.detach.primitive in {"setsid", "tmux", "sbatch", "k8s-job"}


@pytest.mark.parametrize(("name", "clock", "month", "duration"), KEY_CLOCKS)
def test_key_danger_clocks_are_present_with_their_month(
    name: str, clock: str, month: str, duration: str
) -> None:
    found = _clock(load_profile(name), clock)
    assert found.stamp.verified == month
    assert duration in found.duration


def test_autodl_release_clock_is_machine_readable_and_taught_at_up() -> None:
    autodl = load_profile("autodl")
    release = _clock(autodl, "stopped-auto-release")
    assert release.when == "stopped" and release.duration_s == 15 * 24 * 3600
    assert "data disk" in release.consequence
    notes = autodl.first_contact_notes()
    assert any("15 days" in n and "data disk" in n and "2026-06" in n for n in notes)


def test_open_conflicts_are_carried_with_a_note() -> None:
    vast = {t.name: t for t in load_profile("vastai").storage}["network-volume"]
    snapshots = {t.name: t for t in load_profile("paperspace").storage}["snapshots"]
    cap = _clock(load_profile("kaggle"), "run-time-cap")
    for stamp in (vast.stamp, snapshots.stamp, cap.stamp):
        assert stamp.status == "conflict" and stamp.note
    assert vast.survives_destroy == "unknown"
    assert load_profile("paperspace").raw["api"]["status"] == "unverified"


def test_corrections_are_encoded_not_the_old_values() -> None:
    assert "default 6" in load_profile("kubernetes").detach.stamp.note  # not 4
    fs = {t.name: t for t in load_profile("autodl").storage}["file-storage"]
    assert fs.size_cap.startswith("20 GB") and fs.survives_destroy is True
    assert "up to 60 s earlier" in _clock(load_profile("slurm"), "early-warning-signal").duration


@pytest.mark.parametrize(
    ("name", "kept", "lost", "bills"),
    [
        ("autodl", "/root/autodl-tmp", "", "data-disk storage"),
        ("vastai", "(volume mount", "/ (container", "local Volumes"),
        ("runpod", "/workspace (network-volume", "/workspace (volume", "Network Volume"),
        ("lambda", "/lambda/nfs", "/ (root", "NFS"),
    ],
)
def test_teardown_notes_follow_the_survival_matrix(
    name: str, kept: str, lost: str, bills: str
) -> None:
    notes = load_profile(name).teardown_notes()
    assert any(n.startswith("kept: " + kept) for n in notes), notes
    if lost:
        assert any(n.startswith("LOST: " + lost) for n in notes), notes
    else:
        assert not any(n.startswith("LOST") for n in notes), notes
    assert any(n.startswith("keeps billing") and bills in n for n in notes), notes


def test_autodl_teardown_warns_about_the_release_clock_not_running_ones() -> None:
    notes = load_profile("autodl").teardown_notes()
    assert any("15 days" in n for n in notes)
    assert not any("nohup" in n for n in notes)
    assert any("释放" in n and "irreversible" in n for n in notes)


def test_every_stamp_is_a_real_month_no_later_than_the_profile() -> None:
    from rgt.profiles.stale import profile_facts

    for profile in list_profiles():
        for fact in profile_facts(profile, today=__import__("datetime").date(2026, 11, 29)):
            assert "2025-01" <= fact.verified <= profile.verified, (profile.name, fact)
