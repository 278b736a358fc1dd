"""`rgt push` over a loopback sshd, side by side with raw `rsync -a` over ssh.

    .venv/bin/python bench/bench_push.py [--gib 1.0] [--small-files 10000] [--rounds 2]

Three numbers (goals from issue 3):
  1. `rgt push` of a ~1 GiB tree of mixed file sizes vs raw `rsync -a -e ssh` (goal <= 1.1x),
     best and median of the interleaved rounds; rgt's time includes the CLI start-up and the
     sha256 check of every file on both ends; also the wait between the end of the transfer
     and `push` returning (the check's tail, measured in-process).
  2. re-push of an unchanged 10,000-file tree through the CLI (goal < 2 s).
  3. bytes re-sent after sshd is killed mid-push and restarted (goal <= 5 % of the tree).
The server is Debian's sshd on 127.0.0.1 (tests/sshd.py), so both sides share this machine's
CPUs: the ssh cipher, both rsync ends and both hashers compete for the same cores.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.sshd import SshServer, SshServers, target_for, wait_for  # noqa: E402

from rgt.transport.rsync import Rsync  # noqa: E402
from rgt.transport.ssh import SshTransport  # noqa: E402

MIB = 1 << 20


def make_tree(root: Path, total: int) -> int:
    """Mixed sizes: a few large files (checkpoints), many 1 MiB (shards), many 64 KiB."""
    root.mkdir(parents=True)
    plan = [
        (total * 6 // 10, 128 * MIB, "large"),
        (total * 3 // 10, MIB, "shard"),
        (total // 10, 64 * 1024, "small"),
    ]
    written = 0
    for budget, size, prefix in plan:
        folder = root / prefix
        folder.mkdir()
        for index in range(max(1, budget // size)):
            (folder / f"{prefix}-{index:05d}.bin").write_bytes(os.urandom(size))
            written += size
    return written


def rgt(*args: str, cwd: Path | None = None) -> tuple[float, dict[str, object]]:
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "rgt.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        check=False,
    )
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"rgt {' '.join(args)} failed: {proc.stderr}")
    return elapsed, json.loads(proc.stdout)


def raw_rsync(server: SshServer, source: Path, dest: str, known_hosts: Path) -> float:
    ssh = (
        f"ssh -p {server.port} -i {server.client_key} -o BatchMode=yes "
        f"-o StrictHostKeyChecking=accept-new -o UserKnownHostsFile={known_hosts}"
    )
    start = time.perf_counter()
    subprocess.run(["rsync", "-a", "-e", ssh, str(source), f"root@127.0.0.1:{dest}/"], check=True)
    return time.perf_counter() - start


def bench_big_tree(server: SshServer, work: Path, total: int, rounds: int) -> dict[str, object]:
    source = work / "tree"
    size = make_tree(source, total)
    raw_times, rgt_times = [], []
    for round_no in range(rounds):
        for side in ("raw", "rgt"):
            dest = work / f"dest-{side}-{round_no}"
            if side == "raw":
                raw_times.append(raw_rsync(server, source, str(dest), work / "raw_known_hosts"))
            else:
                elapsed, _doc = rgt("push", "box", str(source), "--to", str(dest), "--json")
                rgt_times.append(elapsed)
            shutil.rmtree(dest)
    tails = [bench_check_tail(source, work / "dest-tail") for _ in range(rounds)]
    return {
        "tree_bytes": size,
        "files": sum(1 for _ in source.rglob("*.bin")),
        "raw_rsync_s": [round(t, 2) for t in raw_times],
        "rgt_push_s": [round(t, 2) for t in rgt_times],
        "ratio_best": round(min(rgt_times) / min(raw_times), 3),
        "ratio_median": round(statistics.median(rgt_times) / statistics.median(raw_times), 3),
        "wait_after_transfer_s": [round(t, 3) for t in tails],
    }


def bench_check_tail(source: Path, dest: Path) -> float:
    """Seconds from rsync's last progress report (the transfer's end) to `push` returning:
    the wait for the sha256 check of what arrived, which raw rsync does not do."""
    from rgt.jobs.push import push
    from rgt.state.store import Store

    stamps: list[float] = []
    push(
        Store.open(),
        "box",
        [source],
        to=str(dest),
        progress=lambda *_: stamps.append(time.perf_counter()),
    )
    tail = time.perf_counter() - stamps[-1]
    shutil.rmtree(dest)
    return tail


def bench_repush(work: Path, files: int) -> dict[str, object]:
    source = work / "many"
    for index in range(files):
        folder = source / f"d{index // 500:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"f{index:05d}.txt").write_bytes(os.urandom(512))
    first, _ = rgt("push", "box", str(source), "--to", str(work / "many-dest"), "--json")
    again, doc = rgt("push", "box", str(source), "--to", str(work / "many-dest"), "--json")
    return {
        "files": files,
        "first_push_s": round(first, 2),
        "repush_s": round(again, 2),
        "repush_sent_bytes": doc["sent_bytes"],
    }


def bench_interrupted(server: SshServer, work: Path, total: int) -> dict[str, object]:
    source = work / "resume"
    size = make_tree(source, total)
    dest = work / "resume-dest"
    dest.mkdir()
    transport = SshTransport(target_for(server))
    rsync = Rsync(transport, bwlimit_kbps=40_000, backoff_s=0.5, max_backoff_s=2)
    reports: list[object] = []
    worker = threading.Thread(
        target=lambda: reports.append(
            rsync.transfer([str(source)], transport.remote_spec(f"{dest}/"))
        )
    )
    worker.start()
    wait_for(lambda: _arrived(dest) >= size // 2, timeout=600)
    server.stop()
    wait_for(
        lambda: (
            not any(
                p.name.startswith(".") and ".rgt-partial" not in p.parts
                for p in dest.rglob("*")
                if p.is_file()
            )
        ),
        timeout=60,
    )
    arrived = _arrived(dest)
    server.start()
    worker.join()
    report = reports[0]
    final = report.attempts[-1]  # type: ignore[attr-defined]
    resent = final.literal_bytes - (size - arrived)
    return {
        "tree_bytes": size,
        "arrived_before_restart": arrived,
        "attempts": len(report.attempts),  # type: ignore[attr-defined]
        "final_literal_bytes": final.literal_bytes,
        "final_matched_bytes": final.matched_bytes,
        "resent_bytes": resent,
        "resent_percent": round(100 * resent / size, 3),
    }


def _arrived(dest: Path) -> int:
    return sum(p.stat().st_size for p in dest.rglob("*") if p.is_file())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gib", type=float, default=1.0)
    parser.add_argument("--small-files", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="rgt-bench-push-"))
    os.environ["RGT_HOME"] = str(work / "home")
    servers = SshServers(work / "sshd")
    try:
        server = servers()
        subprocess.run(
            [
                sys.executable,
                "-m",
                "rgt.cli",
                "up",
                "generic-ssh",
                "--name",
                "box",
                "--ssh",
                server.ssh_line,
                "--root",
                str(work / "root"),
            ],
            check=True,
            capture_output=True,
        )
        results: dict[str, object] = {
            "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
            "big_tree": bench_big_tree(server, work, int(args.gib * 1024 * MIB), args.rounds),
            "repush_unchanged": bench_repush(work, args.small_files),
            "interrupted": bench_interrupted(server, work, int(args.gib * 256 * MIB)),
        }
        results["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
        print(json.dumps(results, indent=2))
    finally:
        servers.close()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
