"""A real two-node Slurm for tests: one ``slurmctld``, two ``slurmd`` on two "machines".

What works with Debian's slurm-wlm 22.05.8 here (checked 2026-12-06, as root, no systemd):

- **Each slurmd in its own network namespace** (``tests/netns_nodes.py``: a bridge at
  10.77.X.1 in the root namespace, nodes at .2 and .3 on veth pairs, each with its own hostname
  and an ``/etc/hosts`` naming every node). ``slurmd -f CONF -N <node>`` runs inside; the node's
  line is ``NodeName=<node> NodeHostname=<node> NodeAddr=10.77.X.{2,3}``; both slurmd use the
  same ``SlurmdPort`` (each on its own address). ``slurmctld`` stays in the root namespace as
  ``SlurmctldHost=<hostname>(10.77.X.1)``, so the tests' own ``sbatch``/``squeue`` reach it and
  so do the nodes. Per-node spool, pid and log files come from ``%n`` in ``SlurmdSpoolDir``,
  ``SlurmdPidFile`` and ``SlurmdLogFile``. ``srun`` inside a job reaches the other node by its
  address; ``torchrun --rdzv_endpoint <first node>:<port>`` forms one gloo group across nodes.
  This is the fixture: every node has a distinct address, so a job that uses ``localhost`` or
  the submit host's address where it needs the first node's fails here as on a real cluster.
- Slurm's multiple-slurmd mode also works with this build (two ``slurmd -N d1``/``-N d2`` on
  127.0.0.1, per-node ``Port=6921``/``6922`` honoured, ``srun -N2`` lands one task on each),
  but both nodes share one address, so it cannot catch a wrong rendezvous address.
- ``ip netns exec`` does not work for slurmd: it remounts ``/sys`` without the cgroup mounts
  and slurmd stops with "No filesystem mounted on /sys/fs/cgroup" / "Unable to initialize
  cgroup plugin", even with ``proctrack/pgid`` and ``task/none``; ``nsenter --net`` keeps them.

The cluster has its own ``munged`` (own key, own socket in the temp dir, named by
``AuthInfo=socket=…``), so it never depends on, or disturbs, a system munged or the
single-node fixture's; its ``SLURM_CONF`` is passed per command (``run``, ``env``) and never
set process-wide, so ``slurm_cluster`` keeps working beside it. Everything it starts — daemons,
jobs' processes, namespaces, veths, bridge — is stopped at the end of the session, also when a
test failed.

Fixture: ``slurm_two_nodes`` (one per session), a ``SlurmNodes``.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.netns_nodes import NodeNetwork, ip
from tests.netns_nodes import skip_reason as netns_skip_reason
from tests.slurm import SETTINGS, SlurmCluster, _skip_reason, _stop, _wait_for, free_port

NODES = """\
AuthInfo=socket={munge_socket}
SlurmdSpoolDir={spool}/%n
SlurmdPidFile={dir}/%n.pid
SlurmdLogFile={dir}/%n.log
{node_lines}
PartitionName=nodes Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""
NODE = "NodeName={n.name} NodeHostname={n.name} NodeAddr={n.address} CPUs={cpus} RealMemory=2000"


@dataclass
class SlurmNodes(SlurmCluster):
    """The cluster: ``run("sbatch", …)`` as in ``SlurmCluster``; ``names``/``addresses`` of the
    nodes in order; ``env()`` for code under test (``monkeypatch.setenv("SLURM_CONF", …)``)."""

    network: NodeNetwork
    spool: Path  # each node's SlurmdSpoolDir and munged's socket, under a short path
    started_s: float = 0.0

    @property
    def names(self) -> list[str]:
        return [node.name for node in self.network.nodes]

    @property
    def addresses(self) -> list[str]:
        return [node.address for node in self.network.nodes]

    def env(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def power_off(self, index: int) -> int:
        """Node ``index`` loses power: every process on it (its slurmd, the steps' slurmstepd,
        the jobs' processes) is SIGKILLed at once; how many there were. Slurm learns of it only
        when the controller marks the node DOWN (``SlurmdTimeout`` later, or ``scontrol``)."""
        node = self.network.nodes[index]
        killed = 0
        for _ in range(20):  # a process forked while the list was read is caught next round
            pids = [int(pid) for pid in ip("netns", "pids", node.netns).stdout.split()]
            if not pids:
                return killed
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                    killed += 1
            time.sleep(0.1)
        raise AssertionError(f"processes still run on {node.name}: {pids}")

    def power_on(self, index: int, timeout: float = 60) -> None:
        """Node ``index`` boots again: its slurmd starts and registers, the controller returns
        it to service (``ReturnToService=2``) and delivers what it held for the node while it
        was down (a job's terminate request). On a real cluster that is minutes before a
        requeued job may start (its BeginTime); a test that then starts the job at once must
        not start it sooner: Slurm 22.05 delivers the old terminate to the job's new incarnation
        (same job id) and no step of it can ever start on that node again."""
        node = self.network.nodes[index]
        argv = self.network.command(node, ["slurmd", "-f", str(self.conf), "-N", node.name])
        subprocess.run(argv, check=True, timeout=30, env=self.env())

        def settled() -> bool:
            state = self.run("sinfo", "-h", "-n", node.name, "-o", "%T", check=False).strip()
            agents = re.search(r"^Agent count:\s*(\d+)", self.run("sdiag"), re.MULTILINE)
            return state == "idle" and agents is not None and agents.group(1) == "0"

        _wait_for(settled, timeout, f"{node.name} never came back:\n{self.logs()}")

    def logs(self) -> str:
        tail = []
        for name in ["slurmctld.log", *(f"{node}.log" for node in self.names)]:
            path = self.directory / name
            if path.exists():
                tail.append(f"== {name}\n" + "\n".join(path.read_text().splitlines()[-15:]))
        return "\n".join(tail)


def _munge_answers(sock: Path) -> bool:
    cred = subprocess.run(["munge", "-S", str(sock), "-n"], capture_output=True, timeout=10)
    check = subprocess.run(
        ["unmunge", "-S", str(sock)], input=cred.stdout, capture_output=True, timeout=10
    )
    return cred.returncode == 0 and check.returncode == 0


def _start_munge(directory: Path) -> Path:
    """A munged of our own (key, socket, pid, log, seed in ``directory``); its socket."""
    directory.mkdir(mode=0o700)
    key, sock = directory / "munge.key", directory / "munge.socket"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    files = {name: directory / f"munged.{name}" for name in ("pid", "log", "seed")}
    argv = ["/usr/sbin/munged", "--force", f"--key-file={key}", f"--socket={sock}"]
    argv += [f"--{name}-file={path}" for name, path in files.items()]
    subprocess.run(argv, check=True, capture_output=True, timeout=30)
    _wait_for(lambda: _munge_answers(sock), 15, "our munged did not answer")
    return sock


def _write_conf(cluster: SlurmNodes, munge_socket: Path) -> None:
    network = cluster.network
    (cluster.directory / "state").mkdir()
    for node in network.nodes:
        (cluster.spool / node.name).mkdir()
    cpus = os.cpu_count() or 1
    settings = SETTINGS.format(
        ctld_host=f"{socket.gethostname()}({network.gateway})",
        ctld_port=free_port(),
        slurmd_port=free_port(),
        dir=cluster.directory,
    )
    nodes = NODES.format(
        munge_socket=munge_socket,
        dir=cluster.directory,
        spool=cluster.spool,
        node_lines="\n".join(NODE.format(n=node, cpus=cpus) for node in network.nodes),
    )
    cluster.conf.write_text(settings + nodes)


def _all_idle(cluster: SlurmNodes) -> bool:
    states = cluster.run("sinfo", "-h", "-N", "-o", "%N %T", check=False).split("\n")
    return sorted(line for line in states if line.strip()) == [f"{n} idle" for n in cluster.names]


def _start(cluster: SlurmNodes) -> None:
    conf = str(cluster.conf)
    subprocess.run(["slurmctld", "-c", "-f", conf], check=True, timeout=30, env=cluster.env())
    for node in cluster.network.nodes:
        argv = cluster.network.command(node, ["slurmd", "-f", conf, "-N", node.name])
        subprocess.run(argv, check=True, timeout=30, env=cluster.env())
    _wait_for(lambda: _all_idle(cluster), 60, f"the nodes never became idle:\n{cluster.logs()}")


def _stop_all(cluster: SlurmNodes) -> None:
    if (cluster.directory / "slurmctld.pid").exists():
        cluster.run("scancel", "--full", "--partition=nodes", check=False)
        time.sleep(1)
    for name in cluster.names:
        _stop(cluster.directory / f"{name}.pid")
    _stop(cluster.directory / "slurmctld.pid")
    cluster.network.down()  # and whatever of the jobs still ran on the nodes
    _stop(cluster.spool / "munge" / "munged.pid")  # it writes its seed file as it exits
    shutil.rmtree(cluster.spool, ignore_errors=True)


@pytest.fixture(scope="session")
def slurm_two_nodes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmNodes]:
    reason = _skip_reason() or netns_skip_reason()
    if reason:
        pytest.skip(reason)
    begun = time.monotonic()
    directory = tmp_path_factory.mktemp("slurm-nodes")
    # slurmstepd's and munged's unix sockets need a path under 108 bytes; pytest's can be longer
    spool = Path(tempfile.mkdtemp(prefix="rgt-nodes."))
    network = NodeNetwork(directory, 2, prefix="rg")
    cluster = SlurmNodes(directory / "slurm.conf", directory, network, spool)
    try:
        sock = _start_munge(spool / "munge")
        network.up()
        _write_conf(cluster, sock)
        _start(cluster)
        cluster.started_s = time.monotonic() - begun
        yield cluster
    finally:
        _stop_all(cluster)
