"""``fake_for(vendor)``: a vendor fake on loopback, with rgt's URL and key variables pointed at
it for the test; every fake started is stopped at the end."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.vendors.fakes import FAKES, KEY_VARIABLES, URL_VARIABLES
from tests.vendors.fakes._server import FakeVendor

SSH_PORT = 2222


@pytest.fixture
def fake_for(monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    started: list[FakeVendor] = []

    def start(vendor: str, **kwargs: object) -> FakeVendor:
        fake = FAKES[vendor](ssh_port=kwargs.pop("ssh_port", SSH_PORT), **kwargs)  # type: ignore[arg-type]
        monkeypatch.setenv(URL_VARIABLES[vendor], fake.start())
        monkeypatch.setenv(KEY_VARIABLES[vendor], fake.key)
        started.append(fake)
        return fake

    yield start
    for fake in started:
        fake.stop()
