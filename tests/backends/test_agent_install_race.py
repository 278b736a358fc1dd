"""A machine call that found no agent, while another thread or process installed it before the
failure was looked at: the call installs (a no-op now) and runs again instead of failing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rgt.backends.local import LocalBackend
from rgt.backends.remote import machine_call
from rgt.lifecycle.machines import register_local
from rgt.state.store import Store


def test_an_agent_installed_meanwhile_by_someone_else_is_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = LocalBackend(register_local(Store.open(), "box", tmp_path / "root").machine)
    real_run, starts = backend.transport.run, []

    def run(argv: list[str], **kwargs: Any) -> Any:
        result = real_run(argv, **kwargs)
        if not starts:  # the first start found no agent; the other pull installs it now
            assert not result.ok and "can't open file" in result.stderr_tail()
            backend.install_agent()
        starts.append(argv)
        return result

    monkeypatch.setattr(backend.transport, "run", run)
    found = machine_call(backend, "patrol", ["--events", "0", "--no-gpu"])
    assert isinstance(found, dict) and len(starts) == 2
