"""``rgt profiles`` as a user runs it: a real process, one JSON document, exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from functools import partial
from importlib import resources
from pathlib import Path

import pytest

from tests import clirun

rgt = partial(clirun.rgt, "profiles")


def test_list_json_shape() -> None:
    proc = rgt("--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    rows = {row["name"]: row for row in doc["profiles"]}
    assert len(rows) == 15
    assert rows["autodl"] == {
        "name": "autodl",
        "title": "AutoDL",
        "kind": "ssh-rental",
        "backend": "ssh",
        "verified": "2026-08",
        "origin": "bundled",
        "overrides_bundled": False,
        "path": rows["autodl"]["path"],
    }
    assert rows["autodl"]["path"].endswith("autodl.toml")
    assert {r["kind"] for r in rows.values()} == {
        "ssh-rental",
        "cloud-api",
        "slurm",
        "kubernetes",
        "local",
        "notebook",
    }


def test_show_json_carries_the_document_and_the_notes() -> None:
    doc = json.loads(rgt("vastai", "--json").stdout)
    assert doc["name"] == "vastai" and doc["durable_dir"] == "~"
    assert doc["profile"]["meter_stop"]["action"] == "destroy"
    assert doc["profile"]["meter_stop"]["irreversible"] is True
    assert any(n.startswith("LOST: /") for n in doc["teardown_notes"])
    assert any("forever" in n for n in doc["first_contact_notes"])


def test_show_human_prints_matrix_clocks_and_literal_brackets(rgt_home: Path) -> None:
    text = resources.files("rgt.profiles").joinpath("autodl.toml").read_text(encoding="utf-8")
    (rgt_home / "profiles").mkdir()
    (rgt_home / "profiles" / "autodl.toml").write_text(
        text.replace('"a machine left stopped (关机)"', '"a [bold]stopped[/] machine"'),
        encoding="utf-8",
    )
    proc = rgt("autodl")
    assert proc.returncode == 0, proc.stderr
    assert "survival matrix" in proc.stdout and "/root/autodl-fs" in proc.stdout
    assert "15 days" in proc.stdout and "a [bold]stopped[/] machine" in proc.stdout
    assert "overrides the bundled" in proc.stdout


@pytest.mark.slow  # > 1 s on two cores
def test_stale_json_with_a_fixed_today() -> None:
    proc = rgt("--stale", "--months", "6", "--today", "2026-11-29", "--json")
    assert json.loads(proc.stdout) == {
        "months": 6,
        "today": "2026-11-29",
        "stale": [
            {
                "profile": "runpod",
                "fact": "spot",
                "verified": "2026-04",
                "age_months": 7,
                "status": "verified",
                "source": "D:rp-price; R:spot; R:runpod (RP15)",
            }
        ],
    }
    fresh = rgt("--stale", "--months", "12", "--today", "2026-11-29")
    assert fresh.returncode == 0 and "no fact is older than 12 months" in fresh.stdout


def test_unknown_profile_is_a_usage_error_with_the_known_names() -> None:
    proc = rgt("autodll", "--json")
    assert proc.returncode == 2
    doc = json.loads(proc.stdout)
    assert doc["error"] == "UsageError" and "autodl" in doc["message"] and doc["fix"]


def test_malformed_user_profile_names_file_and_field_on_stderr(rgt_home: Path) -> None:
    (rgt_home / "profiles").mkdir()
    bad = rgt_home / "profiles" / "mine.toml"
    text = resources.files("rgt.profiles").joinpath("local.toml").read_text(encoding="utf-8")
    bad.write_text(
        text.replace('name = "local"', 'name = "mine"').replace(
            'kind = "local"', 'kind = "laptop"'
        ),
        encoding="utf-8",
    )
    proc = rgt("mine")
    assert proc.returncode == 2
    assert str(bad) in proc.stderr and "field kind" in proc.stderr
    assert "'notebook'" in proc.stderr  # what is allowed


def test_importing_profiles_stays_light() -> None:
    code = (
        "import sys, rgt.profiles, rgt.cli.profiles\n"
        "print(sorted(m for m in ('jsonschema', 'torch', 'numpy', 'httpx') "
        "if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"
