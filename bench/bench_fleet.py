"""Start-up of a 2-node SSH fleet: `rgt run a,b -- torchrun …` vs a hand-run torchrun over ssh.

    .venv/bin/python bench/bench_fleet.py [--rounds 3]

Two real sshd on 127.0.0.1 (tests/sshd.py) are the nodes. Each round, interleaved:

- **by hand**: one `ssh node torchrun --nnodes 2 --node_rank R --master_addr 127.0.0.1
  --master_port P --nproc_per_node 2 started.py` per node, both started at once (the code is
  already in place, as it would be after a hand-made rsync);
- **rgt**: `rgt run a,b --probe-seconds 0 -- sh -c 'torchrun … "$RGT_…"'` from a fresh CLI
  process: the checks, the snapshot (pushed to both nodes on the first round, found there
  after), the agents, the rendezvous variables.

The time is from the moment the command is started to the moment the last of the 4 ranks has
passed ``init_process_group`` (each rank writes ``time.time()`` to a marker file): "all ranks
started". Goal (issue 36): rgt / by hand <= 1.5x. Both sides share this machine's CPUs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.sshd import SshServer, SshServers, register  # noqa: E402

WORKER = """
import os, time
import torch.distributed as dist
dist.init_process_group("gloo")
mark = os.path.join(os.environ["MARK_DIR"], "rank-%d" % dist.get_rank())
open(mark, "w").write(repr(time.time()))
dist.barrier()
dist.destroy_process_group()
"""
RUN = (
    '"{py}" -m torch.distributed.run --nnodes 2 --nproc_per_node 2 --node_rank {rank} '
    "--master_addr 127.0.0.1 --master_port {port} started.py"
)
FLEET = (
    'exec "$PY" -m torch.distributed.run --nnodes "$RGT_NNODES" --nproc_per_node 2 '
    '--node_rank "$RGT_NODE_RANK" --master_addr "$RGT_MASTER_ADDR" '
    '--master_port "$RGT_MASTER_PORT" started.py'
)


def all_started(marks: Path, timeout: float = 300) -> float:
    """When the last of the 4 ranks passed init_process_group (epoch seconds)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = sorted(marks.glob("rank-*"))
        if len(found) == 4 and all(p.read_text() for p in found):
            return max(float(p.read_text()) for p in found)
        time.sleep(0.05)
    raise RuntimeError(f"not all ranks started within {timeout}s: {sorted(marks.iterdir())}")


def by_hand(servers: tuple[SshServer, SshServer], project: Path, marks: Path, port: int) -> float:
    env = f"cd {project} && MARK_DIR={marks} OMP_NUM_THREADS=1 "
    begun = time.time()
    procs = []
    for rank, server in enumerate(servers):
        ssh = ["ssh", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no", "-o",
               "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR", "-i",
               str(server.client_key), "-p", str(server.port), "root@127.0.0.1"]  # fmt: skip
        command = env + RUN.format(py=sys.executable, rank=rank, port=port)
        procs.append(subprocess.Popen([*ssh, command], stdout=subprocess.DEVNULL))
    last = all_started(marks)
    for proc in procs:
        proc.wait(timeout=120)
    return last - begun


def with_rgt(project: Path, marks: Path) -> float:
    argv = [sys.executable, "-m", "rgt.cli", "run", "a,b", "--probe-seconds", "0", "--json",
            "--env", f"PY={sys.executable}", "--env", f"MARK_DIR={marks}",
            "--env", "OMP_NUM_THREADS=1", "--", "sh", "-c", FLEET]  # fmt: skip
    begun = time.time()
    proc = subprocess.run(argv, cwd=project, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr[-2000:])
    last = all_started(marks)
    job = json.loads(proc.stdout)["job_id"]
    follow = [sys.executable, "-m", "rgt.cli", "logs", job, "-f"]  # ended before the next round
    subprocess.run(follow, capture_output=True, check=False, timeout=120)
    return last - begun


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="rgt-bench-fleet-"))
    os.environ["RGT_HOME"] = str(base / "home")
    factory = SshServers(base / "sshd")
    servers = (factory(), factory())
    try:
        for server, name in zip(servers, ("a", "b"), strict=True):
            register(server, name, base / f"root-{name}")
        project = base / "proj"
        project.mkdir()
        (project / "started.py").write_text(WORKER)
        hand, fleet = [], []
        for index in range(args.rounds):  # interleaved, the order alternating
            for side in ("rgt", "hand") if index % 2 == 0 else ("hand", "rgt"):
                marks = base / f"{side}-{index}"
                marks.mkdir()
                if side == "rgt":
                    fleet.append(with_rgt(project, marks))
                else:
                    hand.append(by_hand(servers, project, marks, 29500 + index))
            print(f"round {index + 1}: rgt {fleet[-1]:.2f} s, by hand {hand[-1]:.2f} s")
    finally:
        factory.close()
    report(hand, fleet)


def report(hand: list[float], fleet: list[float]) -> None:
    med_hand, med_fleet = statistics.median(hand), statistics.median(fleet)
    print(f"by hand: median {med_hand:.2f} s, best {min(hand):.2f} s")
    print(f"rgt run a,b: median {med_fleet:.2f} s, best {min(fleet):.2f} s "
          f"(first round pushes the code: {fleet[0]:.2f} s)")  # fmt: skip
    print(f"ratio (medians): {med_fleet / med_hand:.2f}x (goal <= 1.5x)")
    steady = statistics.median(fleet[1:]) if len(fleet) > 1 else med_fleet
    print(f"ratio, rounds after the first: {steady / med_hand:.2f}x")


if __name__ == "__main__":
    main()
