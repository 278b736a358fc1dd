"""Two sshd "nodes", each in its own network namespace with its own address and hostname,
reached from the root namespace: a 2-node x 2-process gloo torchrun started by hand over ssh on
each (node 0 the master at its own address) forms one group of 4 and all-reduces across nodes."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.infra import allreduce
from tests.netns_nodes import SshNodes
from tests.sshd import free_port

WORKER = Path(allreduce.__file__)


def torchrun(nodes: SshNodes, node_rank: int, port: int) -> str:
    argv = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2"]
    argv += ["--nproc_per_node", "2", "--node_rank", str(node_rank)]
    argv += ["--rdzv_endpoint", f"{nodes.addresses[0]}:{port}", str(WORKER)]
    return shlex.join(argv)


def test_each_node_is_its_own_host(ssh_two_nodes: SshNodes) -> None:
    seen = [
        subprocess.run(ssh_two_nodes.ssh(i, "hostname; hostname -i"), capture_output=True,
                       text=True, timeout=30, check=True).stdout.split()
        for i in range(2)
    ]  # fmt: skip
    assert seen == [
        [n, a] for n, a in zip(ssh_two_nodes.names, ssh_two_nodes.addresses, strict=True)
    ]
    print(f"ssh_two_nodes started in {ssh_two_nodes.started_s:.1f} s: {seen}")


@pytest.mark.slow
def test_gloo_all_reduce_across_two_ssh_nodes(ssh_two_nodes: SshNodes) -> None:
    pytest.importorskip("torch")
    port = free_port()
    procs = [
        subprocess.Popen(ssh_two_nodes.ssh(i, torchrun(ssh_two_nodes, i, port)),
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for i in range(2)
    ]  # fmt: skip
    try:
        outputs = [proc.communicate(timeout=240)[0] for proc in procs]
    finally:
        for proc in procs:
            proc.kill()
    assert [proc.returncode for proc in procs] == [0, 0], outputs
    lines = allreduce.ranks("".join(outputs))
    assert [line["rank"] for line in lines] == [0, 1, 2, 3], outputs
    assert {line["world_size"] for line in lines} == {4}
    assert {line["sum"] for line in lines} == {1.0 + 2 + 3 + 4}
    where = [{(x["host"], x["netns"]) for x in lines if x["node_rank"] == n} for n in (0, 1)]
    assert len(where[0]) == len(where[1]) == 1 and where[0] != where[1]  # 2 ranks per node
    assert [host for ((host, _),) in where] == ssh_two_nodes.names
    assert {line["master"] for line in lines} == {ssh_two_nodes.addresses[0]}
    print("\n".join(str(line) for line in lines))
