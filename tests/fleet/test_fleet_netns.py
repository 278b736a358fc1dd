"""`rgt run a,b` over two sshd nodes that are separate hosts: each in its own network namespace
with its own address and hostname (tests/netns_nodes.py). rgt reaches both from the root
namespace; RGT_MASTER_ADDR is node 0's own address, which node 1 reaches over the bridge. A
2-node x 2-process gloo torchrun all-reduces across the two hosts; pull covers both."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.clirun import rgt
from tests.fleet.test_fleet_torchrun import all_reduce_on_a_b
from tests.netns_nodes import SshNodes
from tests.sshd import register


@pytest.mark.slow
def test_two_hosts_all_reduce_through_rgt(ssh_two_nodes: SshNodes, tmp_path: Path) -> None:
    pytest.importorskip("torch")
    for index, name in enumerate(("a", "b")):
        register(ssh_two_nodes.servers[index], name, tmp_path / f"root-{name}")
    project = tmp_path / "proj"
    project.mkdir()
    job_id, _, lines = all_reduce_on_a_b(project)
    hosts = [{(x["host"], x["netns"]) for x in lines if x["node_rank"] == n} for n in (0, 1)]
    assert len(hosts[0]) == len(hosts[1]) == 1 and hosts[0] != hosts[1]  # two hosts
    assert [host for ((host, _),) in hosts] == ssh_two_nodes.names
    assert {line["master"] for line in lines} == {ssh_two_nodes.addresses[0]}
    pulled = rgt("pull", job_id, "--to", str(tmp_path / "pulled"), "--json")
    assert pulled.returncode == 0, pulled.stdout[-2000:] + pulled.stderr[-2000:]
    assert [n["node"] for n in json.loads(pulled.stdout)["verify"]["nodes"]] == [0, 1]
    print("\n".join(json.dumps(line) for line in lines))
