"""rgt's own overhead renting through a vendor API, against the RunPod fake with a fixed
provisioning delay and a real sshd on loopback.

    .venv/bin/python bench/bench_vendor_up.py [--delay 3] [--poll 0.25] [--repeats 5]

``up overhead`` = wall time of ``vendor_up`` (create → poll until running → wait for sshd →
register over ssh with trust-on-first-use → install the agent) minus the fake's provisioning
delay; the goal is <= 1.0 s. ``down lag`` = time from the fake's first "gone" answer to
``release`` returning; the goal is one poll interval. In-process (the CLI adds its own start-up,
measured separately as ``rgt --help`` time).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

from tests.sshd import SshServer, SshServers  # noqa: E402
from tests.vendors.fakes.runpod import FakeRunpod  # noqa: E402

from rgt.state.store import Store  # noqa: E402
from rgt.vendors.lifecycle import VendorUp, vendor_up  # noqa: E402
from rgt.vendors.release import release  # noqa: E402


def one_round(server: SshServer, delay: float, n: int, work: Path) -> tuple[float, float]:
    fake = FakeRunpod(
        ssh_host=server.address,
        ssh_port=server.port,
        boot_polls=0,
        boot_seconds=delay,
        gone_polls=2,
    )
    fake._next = 1000 * (n + 1)  # ids unique across rounds, as a vendor's are
    os.environ["RGT_RUNPOD_API_URL"] = fake.start()
    os.environ["RUNPOD_API_KEY"] = fake.key
    try:
        store = Store.open()
        name = f"bench-{n}"
        ask = VendorUp(gpu="A100:1", identity_file=str(server.client_key), timeout_s=120)
        started = time.monotonic()
        said: list[tuple[float, str]] = []
        vendor_up(
            store,
            "runpod",
            name,
            ask,
            root=str(work / name),
            say=lambda m: said.append((time.monotonic() - started, m)),
        )
        if os.environ.get("BENCH_VERBOSE"):
            print(said, time.monotonic() - started, file=sys.stderr)
        up = time.monotonic() - started - delay
        release(store, name)
        (pod,) = fake.instances
        down_lag = time.monotonic() - fake.confirmed_at[pod]
        return up, down_lag
    finally:
        fake.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--delay", type=float, default=3.0)
    parser.add_argument("--poll", type=float, default=0.25)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="rgt-bench-vendor-") as tmp:
        work = Path(tmp)
        os.environ["RGT_HOME"] = str(work / "home")
        os.environ["RGT_VENDOR_POLL_S"] = str(args.poll)
        servers = SshServers(work / "sshd")
        server = servers()
        try:
            rounds = [one_round(server, args.delay, n, work) for n in range(args.repeats)]
        finally:
            servers.close()
    ups, downs = [r[0] for r in rounds], [r[1] for r in rounds]
    cli = time.monotonic()
    subprocess.run([sys.executable, "-m", "rgt.cli", "--help"], capture_output=True, check=True)
    cli = time.monotonic() - cli
    print(
        f"provisioning delay {args.delay:g} s, poll interval {args.poll:g} s, {args.repeats} rounds"
    )
    print(
        f"up overhead (delay subtracted): median {statistics.median(ups):.2f} s, "
        f"max {max(ups):.2f} s (goal <= 1.0 s)"
    )
    print(
        f"down lag after the fake's confirmation: median {statistics.median(downs):.3f} s, "
        f"max {max(downs):.3f} s (goal <= one poll, {args.poll:g} s)"
    )
    print(f"CLI start-up (`rgt --help`): {cli:.2f} s")


if __name__ == "__main__":
    main()
