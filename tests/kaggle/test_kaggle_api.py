"""Kaggle credentials and the API client's rules, against the fake API on loopback: a refused
key names the fix, a key file other users can read is refused, 429 waits for Retry-After, the
kernel's slug and the output paths are safe, an oversized job is refused with the fix."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest

from rgt.errors import KeyRefusedError, UsageError, VendorError
from rgt.notebooks.kaggle import _inside, _stale, kernel_name
from rgt.notebooks.kaggle_api import KaggleClient, KaggleCredentials, OutputFile, credentials
from rgt.notebooks.kaggle_kernel import EMBED_LIMIT, script
from rgt.state.store import utcnow
from tests.clirun import rgt
from tests.kaggle.conftest import KEY, USER
from tests.kaggle.fake import FakeKaggle


@pytest.mark.slow  # two CLI processes
def test_refused_key_names_the_fix_and_never_the_key(kaggle: FakeKaggle, tmp_path: Path) -> None:
    wrong = "kglWRONGKEY0123456789"
    client = KaggleClient(KaggleCredentials(USER, wrong))
    with pytest.raises(KeyRefusedError) as caught:
        client.status(f"{USER}/rgt-nothing")
    assert caught.value.status == 401 and "KAGGLE_KEY" in (caught.value.fix or "")
    assert wrong not in str(caught.value) + repr(client.creds)
    # Through the CLI: `up` reads the credentials, `run` is refused by the API.
    env = {"KAGGLE_KEY": wrong}
    assert rgt("up", "kaggle", "--name", "kw", "--json", env=env).returncode == 0
    (tmp_path / "t.py").write_text("print(1)\n")
    proc = rgt("run", "kw", "--json", "--", "python3", "t.py", cwd=tmp_path, env=env)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "KAGGLE_KEY" in proc.stderr and wrong not in proc.stdout + proc.stderr


@pytest.mark.slow  # two CLI processes
def test_key_file_must_be_private(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KAGGLE_USERNAME", raising=False)
    monkeypatch.delenv("KAGGLE_KEY", raising=False)
    monkeypatch.setenv("KAGGLE_CONFIG_DIR", str(tmp_path))
    keyfile = tmp_path / "kaggle.json"
    keyfile.write_text(f'{{"username": "{USER}", "key": "{KEY}"}}')
    keyfile.chmod(0o644)
    proc = rgt("up", "kaggle", "--name", "kf", "--json")
    assert proc.returncode == 2 and f"chmod 600 {keyfile}" in proc.stderr
    assert KEY not in proc.stdout + proc.stderr
    keyfile.chmod(0o600)
    assert credentials() == KaggleCredentials(USER, KEY)
    proc = rgt("up", "kaggle", "--name", "kf", "--dataset", "me/data-1", "--json")
    assert proc.returncode == 0, proc.stderr
    for path in Path(os.environ["RGT_HOME"]).rglob("*"):
        assert not path.is_file() or KEY.encode() not in path.read_bytes(), path


def test_no_credentials_names_the_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KAGGLE_KEY", raising=False)
    monkeypatch.setenv("KAGGLE_CONFIG_DIR", str(tmp_path / "absent"))
    with pytest.raises(UsageError, match="no Kaggle credentials") as caught:
        credentials()
    assert "KAGGLE_USERNAME" in (caught.value.fix or "")


@pytest.mark.slow  # > 1 s on two cores
def test_429_waits_for_retry_after(kaggle: FakeKaggle) -> None:
    kaggle.throttle = 2
    client = KaggleClient(KaggleCredentials(USER, KEY))
    started = time.monotonic()
    with pytest.raises(VendorError) as caught:  # after the 429s: the kernel does not exist
        client.status(f"{USER}/rgt-absent")
    assert caught.value.status == 404 and kaggle.throttled == 2
    assert time.monotonic() - started >= 2.0  # Retry-After: 1, twice (backoff alone: 1.5 s)


def test_kernel_slug_is_safe(hostile_name: str) -> None:
    slug = kernel_name(f"{hostile_name}-20261201-000000-ab12")
    assert re.fullmatch(r"rgt(-[a-z0-9]+)+", slug) and len(slug) <= 50


def test_output_paths_stay_in_the_job_dir() -> None:
    prefix = "rgt/.rgt/jobs/j1/"
    assert _inside(OutputFile(prefix + "ckpt/a.rgt", "u"), prefix) == "ckpt/a.rgt"
    for bad in ("../x", "ckpt/../../x", "/etc/passwd", "kaggle.json", "code/x", ""):
        assert _inside(OutputFile(prefix + bad, "u"), prefix) is None, bad
    assert _inside(OutputFile("rgt/.rgt/jobs/j2/status.json", "u"), prefix) is None


def test_oversized_job_is_refused_with_the_dataset_fix() -> None:
    with pytest.raises(UsageError) as caught:
        script(b"x" * EMBED_LIMIT, "j1", "agent-1.pyz", "")
    assert "--dataset OWNER/SLUG" in (caught.value.fix or "")
    assert "PAYLOAD" in script(b"small", "j1", "agent-1.pyz", "")


def test_an_answer_for_the_previous_version_is_not_taken_for_the_new_one() -> None:
    now = utcnow()
    v1 = {"version": 1, "attempt": 1, "pushed": "2026-01-01T00:00:00Z"}
    assert not _stale([{**v1, "attempt": None}], 0)  # a first version is never stale
    assert _stale([v1, {"version": 2, "pushed": now}], 1)  # no new attempt yet: old output
    assert not _stale([v1, {"version": 2, "pushed": now}], 2)
    assert not _stale([v1, {"version": 2, "pushed": "2026-01-01T00:00:00Z"}], 1)  # long ago
