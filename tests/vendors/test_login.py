"""`rgt vendors login PLATFORM`: the key comes from a hidden prompt or stdin, never argv; the
file is 0600 from its first byte; a file others can read is refused, for writing and reading."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from rgt.errors import UsageError
from rgt.vendors._keys import api_key, credentials_path
from tests.ttys import PtyRgt
from tests.vendors.fakes._server import FakeVendor

KEY = "rpa_LOGIN_TEST_5e1d2c3b4a"


def login(*args: str, key: str = KEY) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rgt.cli", "vendors", "login", *args, "--json"],
        input=key + "\n",
        capture_output=True,
        text=True,
        env=os.environ.copy(),
        timeout=60,
    )


def test_a_key_from_stdin_is_saved_0600_and_other_tables_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("RUNPOD_API_KEY", raising=False)
    path = credentials_path()
    path.write_text('[notify]\nslack = "https://hooks.example/T0"\n')
    path.chmod(0o600)
    proc = login("runpod")
    assert proc.returncode == 0, proc.stderr
    assert KEY not in proc.stdout + proc.stderr
    assert json.loads(proc.stdout)["mode"] == "0600"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert api_key("runpod") == KEY
    assert 'slack = "https://hooks.example/T0"' in path.read_text()
    assert login("runpod", key="rpa_SECOND_9f8e7d").returncode == 0  # replaced, not doubled
    assert api_key("runpod") == "rpa_SECOND_9f8e7d" and path.read_text().count("[runpod]") == 1


def test_a_file_others_can_read_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VAST_API_KEY", raising=False)
    path = credentials_path()
    path.write_text('[vastai]\napi_key = "old"\n')
    path.chmod(0o644)
    proc = login("vastai")
    assert proc.returncode == 2 and "chmod 600" in json.loads(proc.stdout)["fix"]
    assert path.read_text() == '[vastai]\napi_key = "old"\n'  # untouched
    with pytest.raises(UsageError, match="readable by group or others"):
        api_key("vastai")


@pytest.mark.slow  # > 1 s on two cores
def test_check_refuses_a_wrong_key_and_saves_nothing(fake_for: Callable[..., FakeVendor]) -> None:
    fake = fake_for("lambda")
    proc = login("lambda", "--check", key="wrong-key-0000")
    assert proc.returncode == 1 and "the key was refused" in json.loads(proc.stdout)["message"]
    assert not credentials_path().exists()
    assert login("lambda", "--check", key=fake.key).returncode == 0
    assert fake.key in credentials_path().read_text()


def test_the_prompt_does_not_echo_the_key(tmp_path: Path) -> None:
    session = PtyRgt("vendors", "login", "paperspace", env={"PAPERSPACE_API_KEY": ""})
    session.expect("paperspace API key (hidden)")
    session.type(KEY)
    assert session.wait() == 0, session.seen
    assert KEY.encode() not in session.seen  # echo was off while it was typed
    assert f'api_key = "{KEY}"' in credentials_path().read_text()
