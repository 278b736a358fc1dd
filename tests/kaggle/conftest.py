"""The fake Kaggle API (tests/kaggle/fake.py), started on loopback for each test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.kaggle.fake import FakeKaggle, serve

USER = "alice-k"
# A planted key: no file rgt writes, no request body and no kernel may ever contain it.
KEY = "kglPLANTED0123456789abcdefSECRET"


@pytest.fixture
def kaggle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeKaggle]:
    fake = FakeKaggle(tmp_path / "kaggle-fake", USER, KEY)
    server = serve(fake)
    monkeypatch.setenv("RGT_KAGGLE_API_URL", fake.url + "/v1")
    monkeypatch.setenv("KAGGLE_USERNAME", USER)
    monkeypatch.setenv("KAGGLE_KEY", KEY)
    monkeypatch.setenv("KAGGLE_CONFIG_DIR", str(tmp_path / "no-kaggle-dir"))
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()
        fake.stop()
