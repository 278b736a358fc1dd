"""Renting through a vendor API records the offer's GPUs as the machine's expectation: the
RunPod fake rents an A100:1 offer on the real sshd. That machine has no GPU at all: the audit
says it once (the GPU check), not again as a broken expectation."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from rgt.state.store import Store
from tests.clirun import ok, rgt
from tests.sshd import SshServer
from tests.vendors.conftest import fake_for  # noqa: F401  (the fixture)
from tests.vendors.fakes._server import FakeVendor


@pytest.mark.slow
def test_the_rented_offer_is_the_expectation(
    fake_for: Callable[..., FakeVendor],  # noqa: F811
    sshd_server: SshServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RGT_VENDOR_POLL_S", "0.1")
    fake_for("runpod", ssh_host=sshd_server.address, ssh_port=sshd_server.port)
    up = ok(
        rgt(
            *("up", "runpod", "--name", "box", "--gpu", "A100:1", "--json"),
            *("--ssh-key", str(sshd_server.client_key), "--root", str(tmp_path / "root")),
            timeout=240,
        )
    )
    assert up["expect_gpu"]["gpu"] == "A100" and up["expect_gpu"]["count"] == 1
    assert "runpod offer" in up["expect_gpu"]["source"]
    assert Store.open().machine("box").connection["expect_gpu"]["count"] == 1
    audit = rgt("audit", "box", "--json", timeout=240)
    findings = {f["check"] for f in json.loads(audit.stdout)["findings"]}
    assert "gpu" in findings  # no GPU at all: said once, by the GPU check itself
    assert "gpu expectation" not in findings
