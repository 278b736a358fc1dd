"""A real single-node Slurm for tests: Debian's slurmctld + slurmd + munged, started as root.

Nothing is installed here (``dev.sh test`` installs ``slurm-wlm`` and ``munge``); without the
binaries or without root the fixture skips with the reason. The cluster gets its own
``slurm.conf`` in a temp dir (``SLURM_CONF`` points every Slurm command at it, including the
ones inside jobs, which inherit the submitter's environment), its own ports, state and spool
directories, so a system Slurm — if there is one — is never touched. The recipe is the one
checked on these machines (``reference/test-servers.md``): root daemons, ``proctrack/pgid``,
``task/none``, no cgroups, no accounting (``sacct`` says it is disabled).

Fixture: ``slurm_cluster`` (one per session). Helpers read job state with ``scontrol``.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from rgt.backends._slurm_state import SlurmJob, parse_scontrol

DAEMONS = ("slurmctld", "slurmd", "munged", "sbatch", "scontrol")
MUNGE_DIRS = ("/run/munge", "/var/log/munge", "/var/lib/munge", "/etc/munge")

# The keys every test cluster shares (tests/slurm_nodes.py adds its own nodes to them).
SETTINGS = """\
ClusterName=rgttest
SlurmctldHost={ctld_host}
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
ProctrackType=proctrack/pgid
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
# ended jobs stay visible to scontrol for 10 minutes (there is no accounting database)
MinJobAge=600
KillWait=15
StateSaveLocation={dir}/state
SlurmctldPidFile={dir}/slurmctld.pid
SlurmctldLogFile={dir}/slurmctld.log
"""
SINGLE_NODE = """\
SlurmdSpoolDir={dir}/spool
SlurmdPidFile={dir}/slurmd.pid
SlurmdLogFile={dir}/slurmd.log
NodeName={host} CPUs={cpus} RealMemory={mem_mb} State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""
CONF = SETTINGS + SINGLE_NODE


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class SlurmCluster:
    conf: Path
    directory: Path

    def run(self, *argv: str, check: bool = True) -> str:
        proc = subprocess.run(
            argv, capture_output=True, text=True, timeout=60, check=False, env=self.env()
        )
        if check and proc.returncode != 0:
            raise AssertionError(f"{argv} failed ({proc.returncode}): {proc.stderr}")
        return proc.stdout

    def env(self) -> dict[str, str] | None:
        """The environment Slurm commands run with: this process's (SLURM_CONF set by the
        fixture); a cluster beside it passes its own SLURM_CONF instead."""
        return None

    def job(self, slurm_id: str) -> SlurmJob:
        job = parse_scontrol(self.run("scontrol", "show", "job", "-o", slurm_id))
        assert job is not None, f"Slurm does not know job {slurm_id}"
        return job

    def wait(
        self, slurm_id: str, done: Callable[[SlurmJob], bool], timeout: float = 240
    ) -> SlurmJob:
        deadline = time.monotonic() + timeout
        while True:
            job = self.job(slurm_id)
            if done(job):
                return job
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"job {slurm_id} still {job} after {timeout} s:\n{self.logs()}"
                )
            time.sleep(0.5)

    def release(self, slurm_id: str, **updates: str) -> None:
        """Start a requeued job now: Slurm holds a requeued job back for about two minutes
        (its BeginTime); a test does not wait that out. Not sooner than slurmd allows,
        though: it revokes the credential of the job's last run when that run ends on the
        node, and refuses a new run's credential issued within the same second ("Killing
        non-startable batch JobId=N: Job credential revoked", the job then FAILED). So the
        last run must have left every node (none completing), and a second more pass."""
        _wait_for(self._none_completing, 60, f"a node still completing:\n{self.logs()}")
        time.sleep(1.5)
        extra = [f"{key}={value}" for key, value in updates.items()]
        self.run("scontrol", "update", f"JobId={slurm_id}", "StartTime=now", *extra)

    def _none_completing(self) -> bool:
        states = self.run("sinfo", "-h", "-N", "-o", "%T", check=False).split()
        return bool(states) and not any("completing" in state for state in states)

    def logs(self) -> str:
        tail = []
        for name in ("slurmctld.log", "slurmd.log"):
            path = self.directory / name
            if path.exists():
                tail.append(f"== {name}\n" + "\n".join(path.read_text().splitlines()[-15:]))
        return "\n".join(tail)


def _skip_reason() -> str | None:
    missing = [name for name in DAEMONS if shutil.which(name) is None]
    if missing:
        return f"Slurm is not installed ({', '.join(missing)} missing): run `bash dev.sh test`"
    if os.geteuid() != 0:
        return "the test Slurm runs its daemons as root"
    return None


def _munge_works() -> bool:
    try:
        cred = subprocess.run(["munge", "-n"], capture_output=True, timeout=10, check=False)
        check = subprocess.run(["unmunge"], input=cred.stdout, capture_output=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return False
    return cred.returncode == 0 and check.returncode == 0


def _start_munge(directory: Path) -> int | None:
    """munged with a fresh key unless one already answers; returns the pid we started."""
    if _munge_works():
        return None
    key = directory / "munge.key"
    key.write_bytes(os.urandom(1024))
    for path in MUNGE_DIRS:
        Path(path).mkdir(parents=True, exist_ok=True)
        shutil.chown(path, "munge", "munge")
    shutil.chown(key, "munge", "munge")
    key.chmod(0o400)
    pidfile = directory / "munged.pid"
    subprocess.run(
        ["/usr/sbin/munged", "--force", f"--key-file={key}", f"--pid-file={pidfile}"],
        check=True,
        capture_output=True,
        timeout=30,
    )
    _wait_for(_munge_works, 15, "munged did not answer")
    return int(pidfile.read_text().split()[0])


def _wait_for(predicate: Callable[[], bool], timeout: float, message: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(message)
        time.sleep(0.3)


def _write_conf(directory: Path) -> Path:
    for sub in ("state", "spool"):
        (directory / sub).mkdir()
    mem_mb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20
    conf = directory / "slurm.conf"
    conf.write_text(
        CONF.format(
            host=socket.gethostname(),
            ctld_host=socket.gethostname(),
            ctld_port=free_port(),
            slurmd_port=free_port(),
            dir=directory,
            cpus=os.cpu_count() or 1,
            mem_mb=int(mem_mb * 0.8),
        )
    )
    return conf


def _node_idle(cluster: SlurmCluster) -> bool:
    try:
        return cluster.run("sinfo", "-h", "-o", "%T", check=False).strip() == "idle"
    except subprocess.SubprocessError:
        return False


def _stop(pidfile: Path) -> None:
    try:
        pid = int(pidfile.read_text().split()[0])
        os.kill(pid, signal.SIGTERM)
    except (OSError, ValueError):
        return
    for _ in range(100):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    os.kill(pid, signal.SIGKILL)


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    directory = tmp_path_factory.mktemp("slurm")
    munged = _start_munge(directory)
    conf = _write_conf(directory)
    saved = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = str(conf)
    cluster = SlurmCluster(conf=conf, directory=directory)
    try:
        subprocess.run(["slurmctld", "-c", "-f", str(conf)], check=True, timeout=30)
        subprocess.run(["slurmd", "-f", str(conf)], check=True, timeout=30)
        _wait_for(lambda: _node_idle(cluster), 30, "the Slurm node never became idle")
        yield cluster
    finally:
        cluster.run("scancel", "--full", "--partition=debug", check=False)
        time.sleep(1)
        _stop(directory / "slurmd.pid")
        _stop(directory / "slurmctld.pid")
        if munged:
            os.kill(munged, signal.SIGTERM)
        if saved is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = saved
