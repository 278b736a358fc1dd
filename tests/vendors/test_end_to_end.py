"""Each vendor end to end through the real CLI: `up` rents from the fake (which hands out the
address of the real sshd the tests start), `run`, `pull`, a human approves at a terminal,
`down` terminates and polls until the fake really forgot the instance. A planted API key
appears in no file rgt wrote (RGT_HOME with state.db, logs, events; the machine root; the
pulled files).

Lambda and Paperspace APIs give only an IP (``ip``, ``publicIp``): their login is port 22 and
a fixed user (ubuntu, paperspace). The test sshd listens elsewhere as root, so their `up`
passes ``--ssh-port``/``--ssh-user`` as a user of a custom image would; RunPod and vast.ai
report the port in the API answer and the client uses it. The vendor-independent money checks
(status, watch, a refused `down`) run once, on RunPod."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from rgt.state.store import Store
from rgt.vendors._rest import VendorClient
from rgt.vendors.paperspace import DEFAULT_TEMPLATE
from tests import clirun
from tests.clirun import ok
from tests.jobs.test_local_lifecycle import _approve_at_a_terminal
from tests.sshd import SshServer
from tests.vendors.fakes._server import FakeVendor

JOB = """
import json, os, pathlib
out = pathlib.Path(os.environ["RGT_OUTPUT_DIR"])
(out / "result.json").write_text(json.dumps({"ok": True}))
print("step 1 loss 0.5", flush=True)
"""


@dataclass(frozen=True)
class Vendor:
    name: str
    key: str  # planted: must appear in no file rgt wrote
    price: float  # the cheapest A100:1 in the fake's catalogue
    terminate: tuple[str, str]  # the request that stops the meter
    read: str  # the path of one instance's read, before its id
    fixed_login: bool  # the API gives no port/user: pass --ssh-port/--ssh-user
    image: tuple[str, str, str] | None = None  # create's (path, field, value) without --image


IMAGE = VendorClient.default_image
VENDORS = [
    Vendor(
        "runpod",
        "rpa_PLANTED_7f3a9c2e1d0b4a5f",
        1.64,
        ("DELETE", "/v1/pods"),
        "/v1/pods/",
        False,
        ("/v1/pods", "imageName", IMAGE),
    ),
    Vendor(
        "vastai",
        "vast_PLANTED_0c1d2e3f4a5b6c7d",
        0.95,
        ("DELETE", "/instances/"),
        "/instances/",
        False,
        ("/asks/", "image", IMAGE),
    ),
    Vendor(
        "lambda",
        "secret_PLANTED_lambda_9a8b7c6d",
        1.29,
        ("POST", "/instance-operations/terminate"),
        "/instances/",
        True,
    ),
    Vendor(
        "paperspace",
        "ps_PLANTED_5e4d3c2b1a0f9e8d",
        3.09,
        ("DELETE", "/machines/"),
        "/machines/",
        True,
        ("/machines", "templateId", DEFAULT_TEMPLATE),  # not a container image
    ),
]


def rgt(v: Vendor, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    proc = clirun.rgt(*args, cwd=cwd, timeout=240)
    assert v.key not in proc.stdout + proc.stderr, f"the API key was printed by {args}"
    return proc


@pytest.mark.slow
@pytest.mark.parametrize("v", VENDORS, ids=[v.name for v in VENDORS])
def test_up_run_pull_approve_down(
    v: Vendor,
    fake_for: Callable[..., FakeVendor],
    sshd_server: SshServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RGT_VENDOR_POLL_S", "0.1")
    monkeypatch.setenv("RGT_DEBUG", "1")  # the debug log of every request must not carry it
    fake = fake_for(
        v.name, ssh_host=sshd_server.address, ssh_port=sshd_server.port, gone_polls=3, key=v.key
    )
    root = tmp_path / "machine root"
    login = ["--ssh-port", str(sshd_server.port), "--ssh-user", "root"] if v.fixed_login else []
    up = ok(
        rgt(
            v,
            *("up", v.name, "--name", "box", "--gpu", "A100:1", "--json"),
            *("--ssh-key", str(sshd_server.client_key), "--root", str(root), *login),
            *("--budget", "1000"),
        )
    )
    (instance_id,) = fake.instances
    if v.image:  # each vendor's own default: a container image, or Paperspace's template id
        path, field, value = v.image
        assert [b[field] for m, p, b in fake.requests if m in ("POST", "PUT") and path in p] == [
            value
        ]
    assert up["price_per_hour"] == v.price and up["backend"] == "ssh"
    login_as = Store.open().machine("box").connection  # the API's port, or the override
    assert (login_as["port"], login_as["user"]) == (sshd_server.port, "root")
    project = tmp_path / "proj"
    project.mkdir()
    (project / "job.py").write_text(JOB)
    job = ok(
        rgt(
            v,
            "run",
            "box",
            "--probe-seconds",
            "1",
            "--json",
            "--",
            "python3",
            "job.py",
            cwd=project,
        )
    )
    assert ok(rgt(v, "watch", str(job["job_id"]), "--json"))["state"] == "succeeded"
    if v.name == "runpod":
        _money_checks(v, fake)
    assert ok(rgt(v, "pull", str(job["job_id"]), "--to", str(tmp_path / "got"), "--json"))["ok"]
    _approve_at_a_terminal("box")
    down = ok(rgt(v, "down", "box", "--json"))
    assert down["released"] is True and "confirms it is gone" in str(down["meter"])
    assert fake.count(*v.terminate) == 1
    assert fake.billed() == [] and instance_id in fake.confirmed_at  # a "gone" was seen
    assert fake.count("GET", v.read + instance_id) >= 4  # polled through the lingering reads
    if v.name == "runpod":  # listing the account is each client's own (conformance suite)
        assert ok(rgt(v, "machines", "--orphans", "--json"))["orphans"] == []
    _assert_nowhere(v.key.encode(), Path(os.environ["RGT_HOME"]), root, tmp_path / "got")


def _money_checks(v: Vendor, fake: FakeVendor) -> None:
    money = ok(rgt(v, "status", "--json"))["billing"]  # asks the vendor (a key is set)
    assert money["orphans"]["orphans"] == [] and money["budgets"][0]["machine"] == "box"
    assert (
        ok(rgt(v, "watch", "--once", "--json"))["billing"]["costs"][0]["price_source"] == "vendor"
    )
    assert rgt(v, "down", "box", "--json").returncode == 3  # not pulled: the pod keeps running
    assert fake.billed() and fake.count(*v.terminate) == 0


def _assert_nowhere(secret: bytes, *roots: Path) -> None:
    checked = 0
    for top in roots:
        for path in top.rglob("*"):
            if path.is_file() and not path.is_symlink():
                checked += 1
                assert secret not in path.read_bytes(), f"the API key leaked into {path}"
    assert checked > 5  # the state DB, known_hosts, the agent, the job's files were read
