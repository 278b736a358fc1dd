"""rgt's own overhead renting through a vendor API, against each vendor's fake with a fixed
provisioning delay and a fixed deletion delay, and a real sshd on loopback; the four vendors
side by side in one run.

    .venv/bin/python bench/bench_vendor_up.py [--delay 3] [--gone 1] [--poll 0.25] [--repeats 3]
        [--vendor runpod --vendor lambda …]

``up overhead`` = wall time of ``vendor_up`` (offers, create → poll until running → wait for
sshd → register over ssh with trust-on-first-use → install the agent) minus the fake's
provisioning delay; the goal is <= 1.0 s. ``down lag`` = time from the moment the fake's
deletion really completed (``--gone`` seconds after the terminate call; reads before then
still show the instance) to ``release`` returning; the goal is one poll interval. In-process
(the CLI adds its own start-up, measured separately as ``rgt --help`` time).
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
from tests.vendors.fakes import FAKES, KEY_VARIABLES, URL_VARIABLES  # noqa: E402

from rgt.state.store import Store  # noqa: E402
from rgt.vendors.lifecycle import VendorUp, vendor_up  # noqa: E402
from rgt.vendors.release import release  # noqa: E402

FIXED_LOGIN = ("lambda", "paperspace")  # the API gives only an IP: port 22, a fixed user


def one_round(
    vendor: str, server: SshServer, args: argparse.Namespace, n: int, work: Path
) -> tuple[float, float]:
    fake = FAKES[vendor](
        ssh_host=server.address,
        ssh_port=server.port,
        boot_polls=0,
        boot_seconds=args.delay,
        gone_polls=0,
        gone_seconds=args.gone,
    )
    fake._next = 1000 * (n + 1)  # ids unique across rounds, as a vendor's are
    os.environ[URL_VARIABLES[vendor]] = fake.start()
    os.environ[KEY_VARIABLES[vendor]] = fake.key
    try:
        store = Store.open()
        name = f"bench-{vendor}-{n}"
        login = {"ssh_port": server.port, "ssh_user": "root"} if vendor in FIXED_LOGIN else {}
        ask = VendorUp(gpu="A100:1", identity_file=str(server.client_key), timeout_s=120, **login)
        started = time.monotonic()
        said: list[tuple[float, str]] = []
        vendor_up(
            store,
            vendor,
            name,
            ask,
            root=str(work / name),
            say=lambda m: said.append((time.monotonic() - started, m)),
        )
        if os.environ.get("BENCH_VERBOSE"):
            print(said, time.monotonic() - started, file=sys.stderr)
        up = time.monotonic() - started - args.delay
        release(store, name)
        returned = time.monotonic()
        (instance,) = fake.instances.values()
        assert instance.deleted_at is not None and instance.id in fake.confirmed_at
        return up, returned - (instance.deleted_at + args.gone)
    finally:
        fake.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--delay", type=float, default=3.0)
    parser.add_argument("--poll", type=float, default=0.25)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--gone", type=float, default=1.0)
    parser.add_argument("--vendor", action="append", choices=sorted(FAKES))
    args = parser.parse_args()
    vendors = args.vendor or list(FAKES)
    results: dict[str, list[tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="rgt-bench-vendor-") as tmp:
        work = Path(tmp)
        os.environ["RGT_HOME"] = str(work / "home")
        os.environ["RGT_VENDOR_POLL_S"] = str(args.poll)
        servers = SshServers(work / "sshd")
        server = servers()
        try:
            for n in range(args.repeats):  # interleaved: the machine's load hits all alike
                for vendor in vendors:
                    results.setdefault(vendor, []).append(one_round(vendor, server, args, n, work))
        finally:
            servers.close()
    cli = time.monotonic()
    subprocess.run([sys.executable, "-m", "rgt.cli", "--help"], capture_output=True, check=True)
    cli = time.monotonic() - cli
    print(
        f"provisioning delay {args.delay:g} s, deletion delay {args.gone:g} s, "
        f"poll interval {args.poll:g} s, {args.repeats} rounds per vendor"
    )
    print(f"{'vendor':<11} {'up overhead median/max':>24} {'down lag median/max':>22}")
    for vendor, rounds in results.items():
        ups, downs = [r[0] for r in rounds], [r[1] for r in rounds]
        print(
            f"{vendor:<11} {statistics.median(ups):>13.2f} / {max(ups):.2f} s "
            f"{statistics.median(downs):>11.3f} / {max(downs):.3f} s"
        )
    print(f"goals: up overhead <= 1.0 s; down lag <= one poll ({args.poll:g} s)")
    print(f"CLI start-up (`rgt --help`): {cli:.2f} s")


if __name__ == "__main__":
    main()
