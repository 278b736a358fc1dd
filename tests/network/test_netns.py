"""The direct route unreachable for real: the machine (sshd) lives in its own network namespace
whose only link is a veth pair to this host; the "direct" address is on that link but no host
answers ARP, so packets go nowhere. The probe gives up within its timeout and the audit chooses
the mirror (on the host's end of the link), which jobs on the machine then get."""

from __future__ import annotations

import http.server
import json
import os
import random
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from rgt.agent.probes.routes import TIMEOUT_S
from tests.network.helpers import profile_with, rgt
from tests.network.test_routes import _Files, job_env
from tests.sshd import SshServer, SshServers, register


def ip(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["ip", *args], capture_output=True, check=False, timeout=30)


@pytest.fixture
def isolated(sshd_factory: SshServers) -> Iterator[tuple[SshServer, str]]:
    """(sshd inside namespace rgtn-N at 10.214.X.2, the /24's prefix); the host is X.1."""
    tag = f"{random.randrange(16**6):06x}"
    ns, outside, inside = f"rgtn-{tag}", f"rgn{tag}a", f"rgn{tag}b"
    subnet = f"10.214.{random.randrange(1, 250)}"
    if os.geteuid() != 0 or ip("netns", "add", ns).returncode != 0:
        pytest.skip("network namespaces need root and `ip netns` (iproute2)")
    try:
        for step in (
            ("link", "add", outside, "type", "veth", "peer", "name", inside),
            ("link", "set", inside, "netns", ns),
            ("addr", "add", f"{subnet}.1/24", "dev", outside),
            ("link", "set", outside, "up"),
            ("netns", "exec", ns, "ip", "addr", "add", f"{subnet}.2/24", "dev", inside),
            ("netns", "exec", ns, "ip", "link", "set", inside, "up"),
            ("netns", "exec", ns, "ip", "link", "set", "lo", "up"),
        ):
            assert ip(*step).returncode == 0, step
        server = sshd_factory(netns=ns, address=f"{subnet}.2")
        yield server, subnet
        server.stop()
    finally:
        ip("netns", "del", ns)
        ip("link", "del", outside)


def test_an_unreachable_direct_route_times_out_and_the_mirror_is_chosen_and_applied(
    isolated: tuple[SshServer, str], tmp_path: Path
) -> None:
    server, subnet = isolated
    mirror_server = http.server.ThreadingHTTPServer((f"{subnet}.1", 0), _Files)
    threading.Thread(target=mirror_server.serve_forever, daemon=True).start()
    mirror = f"http://{subnet}.1:{mirror_server.server_address[1]}"
    try:
        profile_with(network={"hf_endpoint": mirror, "hf_direct": f"http://{subnet}.77"})
        register(server, "box", tmp_path / "data")
        data = json.loads(rgt("audit", "box", "--json").stdout)
        hf = data["routes"]["hf"]
        by_label = {r["label"]: r for r in hf["routes"]}
        assert hf["chosen"] == "mirror" and by_label["mirror"]["bytes"] == 256 * 1024
        direct = by_label["direct"]
        assert direct["ok"] is False and direct["ms"] <= TIMEOUT_S * 1000 + 1500, direct
        assert "refused" not in direct["error"].lower()  # dropped, not refused
        assert job_env("box")["HF_ENDPOINT"] == mirror
    finally:
        mirror_server.shutdown()
        mirror_server.server_close()
