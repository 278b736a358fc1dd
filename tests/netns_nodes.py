"""Separate "machines" on this one host for multi-node tests: one network namespace per node.

Recipe (checked on Debian 12 as root, iproute2 6.1, util-linux ``nsenter``/``unshare``):

- a bridge ``rgb<tag>`` in the root namespace holds the subnet's ``.1`` (the "head node": what
  the tests, ``slurmctld`` and rgt itself see), and each node is a namespace ``rgs<tag><i>``
  joined to the bridge by a veth pair; inside, the veth is renamed ``eth0`` and gets ``.2``,
  ``.3``, …, so the nodes reach each other and the head, and the head reaches them;
- a command runs "on" node i as ``nsenter --net=/run/netns/NS unshare --mount --uts sh -c
  'mount --bind HOSTS /etc/hosts && hostname NAME && exec "$@"'``: its own address, its own
  hostname, and an ``/etc/hosts`` that names every node (as a cluster's DNS would), so
  ``gethostname()`` resolves to the node's address, which is what gloo binds to. Everything
  else — files, ``/run/munge``, the venv — is the one shared filesystem. Not ``ip netns exec``:
  that remounts ``/sys`` without its cgroup mounts and ``slurmd`` refuses to start
  ("No filesystem mounted on /sys/fs/cgroup").

``NodeNetwork.down`` kills every process left in the namespaces, then deletes them (their veths
go with them) and the bridge; the bind mount dies with its private mount namespace. Nothing is
written outside the test's temp dir. Subnets are drawn at random from 10.77.0.0/16 and skipped
when in use, so several sessions can each have a network.

Fixture: ``ssh_two_nodes`` — an sshd on port 22 of each of two nodes, reached from the root
namespace with the session's client key (the loopback variant is ``sshd_factory``).
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.sshd import PRIVSEP_DIR, SSHD, SshServer, SshServers

TOOLS = ("ip", "nsenter", "unshare", "mount")
# Runs "$@" as the node: the hosts file and hostname are set in private namespaces first.
ON_NODE = 'mount --bind "$1" /etc/hosts && hostname "$2" && shift 2 && exec "$@"'


@dataclass(frozen=True)
class Node:
    name: str  # the node's hostname (and its Slurm NodeName)
    address: str
    netns: str


def skip_reason() -> str | None:
    missing = [tool for tool in TOOLS if shutil.which(tool) is None]
    if missing:
        return (
            f"{', '.join(missing)} missing: `bash dev.sh test` installs iproute2 (ip); "
            "nsenter, unshare and mount are Debian's util-linux and mount"
        )
    if os.geteuid() != 0:
        return "network namespaces and veth pairs need root"
    return None


def ip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=False, timeout=30)


def _free_subnet() -> str:
    used = ip("-4", "-o", "addr").stdout
    for _ in range(100):
        subnet = f"10.77.{random.randrange(1, 255)}"
        if f" {subnet}." not in used:
            return subnet
    raise RuntimeError("no free /24 in 10.77.0.0/16")


class NodeNetwork:
    """``count`` nodes on a bridge; ``gateway`` is the root namespace's address on it."""

    def __init__(self, directory: Path, count: int, prefix: str = "node") -> None:
        self.tag = f"{random.randrange(16**6):06x}"
        self.subnet = _free_subnet()
        self.gateway = f"{self.subnet}.1"
        self.bridge = f"rgb{self.tag}"
        self.hosts = directory / "hosts"
        self.nodes = tuple(
            Node(f"{prefix}{self.tag}n{i}", f"{self.subnet}.{i + 2}", f"rgs{self.tag}{i}")
            for i in range(count)
        )

    def up(self) -> None:
        """Create bridge, namespaces and veths; on any failure undo what was made."""
        try:
            self._check("link", "add", self.bridge, "type", "bridge")
            self._check("addr", "add", f"{self.gateway}/24", "dev", self.bridge)
            self._check("link", "set", self.bridge, "up")
            for index, node in enumerate(self.nodes):
                self._add_node(index, node)
        except BaseException:
            self.down()
            raise
        lines = ["127.0.0.1 localhost", f"{self.gateway} {os.uname().nodename}"]
        lines += [f"{node.address} {node.name}" for node in self.nodes]
        self.hosts.write_text("\n".join(lines) + "\n")

    def _add_node(self, index: int, node: Node) -> None:
        outside, inside = f"rgv{self.tag}{index}", f"rgp{self.tag}{index}"
        self._check("netns", "add", node.netns)
        self._check("link", "add", outside, "type", "veth", "peer", "name", inside)
        self._check("link", "set", outside, "master", self.bridge, "up")
        self._check("link", "set", inside, "netns", node.netns)
        for step in (
            ("link", "set", inside, "name", "eth0"),
            ("addr", "add", f"{node.address}/24", "dev", "eth0"),
            ("link", "set", "eth0", "up"),
            ("link", "set", "lo", "up"),
        ):
            self._check("-n", node.netns, *step)

    def _check(self, *args: str) -> None:
        proc = ip(*args)
        if proc.returncode != 0:
            raise RuntimeError(f"ip {' '.join(args)}: {proc.stderr.strip()}")

    def command(self, node: Node, argv: Sequence[str]) -> list[str]:
        """``argv`` run on ``node``: its network, its hostname, its /etc/hosts."""
        enter = ["nsenter", f"--net=/run/netns/{node.netns}", "unshare", "--mount", "--uts"]
        return [*enter, "sh", "-c", ON_NODE, "on-node", str(self.hosts), node.name, *argv]

    def down(self) -> None:
        """Kill what still runs on the nodes, delete namespaces (with their veths), bridge."""
        for node in self.nodes:
            for pid in ip("netns", "pids", node.netns).stdout.split():
                with contextlib.suppress(ProcessLookupError, ValueError):
                    os.kill(int(pid), signal.SIGKILL)
            ip("netns", "del", node.netns)
        for index in range(len(self.nodes)):
            ip("link", "del", f"rgv{self.tag}{index}")  # gone with its namespace; if not
        ip("link", "del", self.bridge)


class NodeSshServer(SshServer):
    """An sshd on port 22 of one node: ``address`` is the node's, commands run on the node."""

    def __init__(self, workdir: Path, client_key: Path, network: NodeNetwork, node: Node):
        self.network, self.node = network, node
        super().__init__(workdir, client_key, netns=node.netns, address=node.address)

    def start(self) -> None:
        PRIVSEP_DIR.mkdir(mode=0o755, exist_ok=True)
        argv = [str(SSHD), "-D", "-f", str(self.config), "-E", str(self.log)]
        self.proc = subprocess.Popen(
            self.network.command(self.node, argv), stdin=subprocess.DEVNULL
        )
        self._wait_ready()


@dataclass
class SshNodes:
    """Two (or more) sshd nodes. ``ssh(i, command)`` is the argv that runs ``command`` there."""

    network: NodeNetwork
    servers: list[NodeSshServer]
    known_hosts: Path
    started_s: float

    @property
    def names(self) -> list[str]:
        return [server.node.name for server in self.servers]

    @property
    def addresses(self) -> list[str]:
        return [server.address for server in self.servers]

    def ssh(self, index: int, command: str) -> list[str]:
        server = self.servers[index]
        options = ["-o", "BatchMode=yes", "-o", f"UserKnownHostsFile={self.known_hosts}"]
        options += ["-o", "StrictHostKeyChecking=accept-new", "-i", str(server.client_key)]
        return ["ssh", *options, "-p", str(server.port), f"root@{server.address}", command]


@pytest.fixture(scope="session")
def ssh_two_nodes(
    sshd_factory: SshServers, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SshNodes]:
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    begun = time.monotonic()
    directory = tmp_path_factory.mktemp("ssh-nodes")
    network = NodeNetwork(directory, 2, prefix="ssh")
    network.up()
    servers: list[NodeSshServer] = []
    try:
        for node in network.nodes:
            workdir = directory / node.name
            servers.append(NodeSshServer(workdir, sshd_factory.client_key, network, node))
            servers[-1].start()
        known = directory / "known_hosts"
        yield SshNodes(network, servers, known, time.monotonic() - begun)
    finally:
        for server in servers:
            server.stop()
        network.down()
