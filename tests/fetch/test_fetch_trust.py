"""The fetch downloader (the code the machine runs) against hubs that lie, on 127.0.0.1.

- The token crosses no origin: a redirect to another port loses ``Authorization``, a redirect
  on the same origin keeps it (huggingface_hub's rule), https to http loses it.
- Bodies are capped: ``--max-bytes`` cuts an endless body (the partial file removed), a body
  that declares no length stops at ``UNSIZED_CAP``, a declared length over the cap is refused.
- ``--sha256`` checks a URL's file.
- Hub names are confined: every hostile name fails the fetch with its reason, nothing lands
  outside ``--to`` (the per-writer grid is tests/faults/test_names_confined.py).
- ``rgt fetch --token-stdin`` end to end on the local machine: the hub got the token, and it is
  nowhere in the job's files, the state, the spec's argv or the CLI's output.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from rgt import fetch
from rgt.fetch import downloader, fetch_body
from tests import clirun
from tests.fetch.hostile_hub import BODY, HubState, hub
from tests.fetch.names import IDS, NAMES, make_area, outside, snapshot

TOKEN = "hf_h4_never_leaves_its_origin_0123456789"


@pytest.fixture
def hubs() -> Iterator[tuple[str, HubState, str, HubState]]:
    with hub() as (a, state_a), hub() as (b, state_b):
        state_a.other = b
        yield a, state_a, b, state_b


@pytest.fixture(autouse=True)
def stdlib(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RGT_FETCH_HUB", "0")
    monkeypatch.setenv("H4_TOKEN", TOKEN)
    monkeypatch.setattr(downloader, "BACKOFF_S", 0.01)


def test_a_redirect_to_another_port_loses_the_token(
    hubs: tuple[str, HubState, str, HubState], tmp_path: Path
) -> None:
    a, state_a, _b, state_b = hubs
    url = f"{a}/redirect-away/f.bin"
    assert downloader.main([url, "--to", str(tmp_path), "--token-env", "H4_TOKEN"]) == 0
    assert (tmp_path / "f.bin").read_bytes() == BODY
    assert state_a.headers_for("/redirect-away")[0]["authorization"] == f"Bearer {TOKEN}"
    received = state_b.headers_for("/plain/f.bin")
    assert received, "the redirect was not followed"
    assert all("authorization" not in h for h in received), received


def test_a_redirect_on_the_same_origin_keeps_the_token(
    hubs: tuple[str, HubState, str, HubState], tmp_path: Path
) -> None:
    a, state_a, _b, _state_b = hubs
    url = f"{a}/redirect-home/f.bin"
    assert downloader.main([url, "--to", str(tmp_path), "--token-env", "H4_TOKEN"]) == 0
    assert state_a.headers_for("/plain/f.bin")[0]["authorization"] == f"Bearer {TOKEN}"


@pytest.mark.parametrize(
    ("start", "target", "kept"),
    [
        ("https://hub.example/a", "http://hub.example/b", False),  # a downgrade to cleartext
        ("https://hub.example/a", "https://hub.example:8443/b", False),
        ("https://hub.example/a", "https://cdn-lfs.hf.co/b", False),  # HF's CDN: signed URL
        ("https://hf-mirror.example/a", "https://huggingface.co/b", True),  # the token's hub
        ("https://HUB.example:443/a", "https://hub.example/b", True),
    ],
)
def test_which_redirects_keep_credentials(start: str, target: str, kept: bool) -> None:
    from rgt.fetch.fetch_aids import SameOrigin

    request = urllib.request.Request(start, headers={"Authorization": "Bearer x", "Cookie": "c"})
    request.add_header("X-Api-Key", "k")
    new = SameOrigin().redirect_request(request, None, 302, "Found", {}, target)
    assert new is not None
    credentials = {"authorization", "cookie", "x-api-key"}
    present = {k.lower() for k in new.headers} & credentials
    assert present == (credentials if kept else set()), present


def test_an_endless_body_is_cut_at_max_bytes(
    hubs: tuple[str, HubState, str, HubState], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, *_ = hubs
    argv = [f"{a}/endless", "--to", str(tmp_path), "--max-bytes", str(1 << 20)]
    assert downloader.main(argv) == 1
    out = capsys.readouterr().out
    assert "sent more than 1048576 bytes (--max-bytes)" in out, out
    assert "partial file was removed" in out
    assert list(tmp_path.iterdir()) == [], "the cut body stayed on disk"


def test_a_body_without_a_length_stops_at_the_default_cap(
    hubs: tuple[str, HubState, str, HubState],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(fetch_body, "UNSIZED_CAP", 2 << 20)  # 16 GiB does not fit a test
    a, _state_a, _b, _ = hubs
    assert downloader.main([f"{a}/endless", "--to", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "more than 2097152 bytes (it declared no length" in out, out
    assert list(tmp_path.iterdir()) == []


def test_a_declared_length_over_max_bytes_is_not_downloaded(
    hubs: tuple[str, HubState, str, HubState], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, *_ = hubs
    assert downloader.main([f"{a}/plain/f.bin", "--to", str(tmp_path), "--max-bytes", "5"]) == 1
    assert f"{len(BODY)} bytes, over --max-bytes 5" in capsys.readouterr().out
    assert list(tmp_path.iterdir()) == []


def test_sha256_of_a_url(
    hubs: tuple[str, HubState, str, HubState], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, *_ = hubs
    url = f"{a}/plain/f.bin"
    assert downloader.main([url, "--to", str(tmp_path), "--sha256", "0" * 64]) == 1
    assert "sha256 differs from the one given by --sha256" in capsys.readouterr().out
    assert not (tmp_path / "f.bin").exists() and not (tmp_path / "f.bin.part").exists()
    good = hashlib.sha256(BODY).hexdigest().upper()
    assert downloader.main([url, "--to", str(tmp_path), "--sha256", good]) == 0
    assert (tmp_path / "f.bin").read_bytes() == BODY
    assert downloader.main([url, "--to", str(tmp_path), "--sha256", "abc"]) == 1
    assert "64 hex digits" in capsys.readouterr().out


@pytest.mark.parametrize("kind", IDS)
def test_every_hostile_hub_name_fails_the_fetch_inside_to(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    hostile = dict(zip(IDS, NAMES, strict=True))[kind]
    area = make_area(tmp_path, hostile)
    before = snapshot(area)
    with hub() as (url, state):
        state.names = ["config.json", hostile.make(area.root)]
        monkeypatch.setenv("HF_ENDPOINT", url)
        code = downloader.main(["hf://org/repo", "--to", str(area.dest)])
    assert outside(before, area) == [], f"written outside --to (exit {code})"
    assert code == 1
    out = capsys.readouterr().out
    assert "rgt-fetch: " in out and ("is refused" in out or "not followed" in out), out


@pytest.mark.slow
def test_the_token_is_nowhere_but_in_the_request(tmp_path: Path) -> None:
    """`rgt fetch --token-stdin` on the local machine: the hub received the token; the job's
    files, the state DB, the spec's argv and the CLI's output never hold it."""
    root = tmp_path / "root"
    clirun.ok(clirun.rgt("up", "local", "--name", "box", "--root", str(root), "--json"))
    with hub() as (url, state):
        state.names = ["config.json"]
        proc = clirun.rgt(
            "fetch", "box", "hf://org/repo", "--token-stdin", "--wait", "30", "--json",
            env={"HF_ENDPOINT": url, "RGT_FETCH_HUB": "0"}, stdin=TOKEN + "\n",
        )  # fmt: skip
    doc = clirun.ok(proc)
    assert doc["state"] == "succeeded", doc
    assert any(h.get("authorization") == f"Bearer {TOKEN}" for _v, _p, h in state.seen)
    assert TOKEN not in proc.stdout + proc.stderr
    home = Path(os.environ["RGT_HOME"])
    for tree in (root, home):
        for path in tree.rglob("*"):
            if path.is_file() and not path.is_symlink():
                assert TOKEN.encode() not in path.read_bytes(), f"the token is in {path}"


PY38 = sorted(Path.home().glob(".pyenv/versions/3.8*/bin/python3.8"))


@pytest.mark.parametrize(
    "python", [sys.executable, *PY38[-1:]], ids=["this-python", "python3.8"][: 1 + len(PY38[-1:])]
)
def test_the_shipped_downloader_confines_names_without_rgt_installed(
    tmp_path: Path, python: str
) -> None:
    """The fetch job's snapshot as the machine gets it (downloader.py, fetch_aids.py,
    _confine.py side by side) under an interpreter that cannot import rgt (``-S``: no
    site-packages), and on a real Python 3.8 where one is installed: the stand-in error class
    refuses the name the same way."""
    snapshot_dir = tmp_path / "snapshot"
    snapshot_dir.mkdir()
    for part in (fetch.DOWNLOADER, fetch.AIDS, fetch.BODY, fetch.CONFINE):
        shutil.copy(part, snapshot_dir / part.name)
    with hub() as (url, state):
        state.names = ["config.json", "../../x"]
        env = {"PATH": os.environ["PATH"], "HF_ENDPOINT": url, "RGT_FETCH_HUB": "0"}
        done = subprocess.run(
            [python, "-S", "-E", "downloader.py", "hf://org/repo", "--to", "d/e/f"],
            cwd=snapshot_dir, env=env, capture_output=True, text=True, timeout=30, check=False,
        )  # fmt: skip
        assert done.returncode == 1, done.stdout + done.stderr
        assert "the hub's file name '../../x' is refused" in done.stdout, done.stdout
        assert "Traceback" not in done.stderr and not (snapshot_dir / "d" / "x").exists()
        state.names = ["config.json", "sub/w.bin"]  # and a good fetch, through the same code
        done = subprocess.run(
            [python, "-S", "-E", "downloader.py", "hf://org/repo", "--to", "good"],
            cwd=snapshot_dir, env=env, capture_output=True, text=True, timeout=30, check=False,
        )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert (snapshot_dir / "good" / "sub" / "w.bin").read_bytes() == BODY
    assert (snapshot_dir / "good" / ".rgt-fetch.json").is_file()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("https://h.example/f", "--sha256", "abc"), "is not 64 hex digits"),
        (("hf://org/repo", "--sha256", "a" * 64), "--sha256 is for a URL"),
        (("https://h.example/f", "--max-bytes", "0"), "0 is not in the range x>=1"),
    ],
)
def test_the_cli_refuses_a_bad_sha256_or_cap_before_anything_starts(
    args: tuple[str, ...], words: str
) -> None:
    proc = clirun.rgt("fetch", "nobox", *args, "--json")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert words in proc.stdout + proc.stderr
