"""The fetch downloader vs `curl` resumed by hand, from a loopback HTTP endpoint that drops the
first connection once, mid-file.

    .venv/bin/python bench/bench_fetch.py [--mib 1024] [--drop-at 0.4] [--baseline OLD.py]

Goals (issue 19): bytes the server sent <= 1.05 x the file; time <= 1.2 x curl.
  - curl: `curl -o F URL` (dies at the drop, exit 18), then `curl -C - -o F URL`: two commands a
    person types; their times are added, the human's reaction time is not.
  - rgt url: `python3 downloader.py URL --to D` (what `rgt fetch NAME URL` runs on the machine),
    size checked; RGT_FETCH_BACKOFF_S=0 so the retry waits as long as a person does (zero).
  - curl + sha256sum: the same, then the hash check a careful person runs.
  - rgt hf: the same file through the hub listing (`hf://org/big`), size and sha256 verified
    (hashed while it is written).
  - rgt hf (baseline): the same with another downloader file (``--baseline``, e.g. main's,
    from `git show main:src/rgt/fetch/downloader.py`), to compare a change in one run.
The job around the downloader (snapshot, agent, ssh) costs a few seconds more and is not
measured here. Everything runs on this machine's cores, server included.
"""

from __future__ import annotations

import argparse
import hashlib
import http.server
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, ClassVar

ROOT = Path(__file__).resolve().parents[1]
DOWNLOADER = ROOT / "src" / "rgt" / "fetch" / "downloader.py"
MIB = 1 << 20


class Files(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    path_on_disk: ClassVar[str] = ""
    size: ClassVar[int] = 0
    sha256: ClassVar[str] = ""
    drop_at: ClassVar[int] = 0
    sent: ClassVar[int] = 0
    armed: ClassVar[bool] = True

    def do_GET(self) -> None:
        if self.path.startswith("/api/models/"):
            doc = {"sha": "0" * 40, "siblings": [{"rfilename": "big.bin", "size": self.size,
                   "lfs": {"sha256": self.sha256, "size": self.size}}]}  # fmt: skip
            body = json.dumps(doc).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        start = int(self.headers.get("Range", "bytes=0-")[6:].split("-")[0] or 0)
        self.send_response(206 if start else 200)
        self.send_header("Content-Length", str(self.size - start))
        if start:
            self.send_header("Content-Range", f"bytes {start}-{self.size - 1}/{self.size}")
        self.end_headers()
        stop = self.size
        if type(self).armed and not start:
            type(self).armed, stop = False, self.drop_at
        self.wfile.flush()
        with open(self.path_on_disk, "rb") as src:  # zero-copy, as a file server sends
            type(self).sent += self.connection.sendfile(src, start, stop - start)
        if stop < self.size:
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)

    def log_message(self, *args: object) -> None:
        pass


def run(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, int]:
    start = time.monotonic()
    proc = subprocess.run(argv, env={**os.environ, **(env or {})}, capture_output=True)
    return time.monotonic() - start, proc.returncode


def trial(name: str, base: str, work: Path, size: int, baseline: str = "") -> dict[str, Any]:
    Files.armed, Files.sent = True, 0
    out = Path(tempfile.mkdtemp(prefix="out-", dir=work))
    os.sync()  # the previous trial's dirty pages are not this one's writeback
    url = f"{base}/org/big/resolve/main/big.bin"
    if name.startswith("curl"):
        t1, rc1 = run(["curl", "-sS", "-o", str(out / "big.bin"), url])
        t2, rc2 = run(["curl", "-sS", "-C", "-", "-o", str(out / "big.bin"), url])
        seconds, ok = t1 + t2, rc1 != 0 and rc2 == 0
        if name == "curl + sha256sum":
            t3, rc3 = run(["sha256sum", str(out / "big.bin")])
            seconds, ok = seconds + t3, ok and rc3 == 0
    else:
        source = url if name == "rgt url" else "hf://org/big"
        env = {"RGT_FETCH_BACKOFF_S": "0", "HF_ENDPOINT": base, "RGT_FETCH_HUB": "0"}
        program = baseline if name.endswith("(baseline)") else str(DOWNLOADER)
        seconds, rc = run([sys.executable, program, source, "--to", str(out)], env)
        ok = rc == 0
    whole = (out / "big.bin").stat().st_size == size
    shutil.rmtree(out)  # 1 GiB a trial
    return {"tool": name, "seconds": round(seconds, 2), "sent_x": round(Files.sent / size, 3),
            "ok": ok and whole}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mib", type=int, default=1024)
    parser.add_argument("--drop-at", type=float, default=0.4)
    parser.add_argument("--baseline", default="", help="another downloader.py to time as well")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved rounds; medians")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-fetch-") as tmp:
        work = Path(tmp)
        blob = work / "blob"
        digest = hashlib.sha256()
        with blob.open("wb") as f:
            for i in range(args.mib):
                chunk = os.urandom(MIB) if i == 0 else (bytes([i % 256]) * MIB)
                f.write(chunk)
                digest.update(chunk)
        Files.path_on_disk, Files.size = str(blob), args.mib * MIB
        Files.sha256, Files.drop_at = digest.hexdigest(), int(args.drop_at * Files.size)
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Files)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        base = f"http://127.0.0.1:{server.server_address[1]}"
        tools = ["curl", "rgt url", "curl + sha256sum", "rgt hf"]
        tools += ["rgt hf (baseline)"] if args.baseline else []
        runs: dict[str, list[dict[str, Any]]] = {n: [] for n in tools}
        for r in range(args.repeats):  # interleaved, and each round starts one tool later:
            for n in tools[r % len(tools) :] + tools[: r % len(tools)]:  # what ran before
                row = trial(n, base, work, Files.size, args.baseline)
                runs[n].append(row)
        server.shutdown()
    rows = [median_row(runs[n]) for n in tools]
    curl = rows[0]["seconds"]
    for r in rows:
        r["vs_curl"] = round(r["seconds"] / curl, 2)
        print(json.dumps(r))


def median_row(rows: list[dict[str, Any]]) -> dict[str, Any]:
    times = sorted(r["seconds"] for r in rows)
    return {"tool": rows[0]["tool"], "seconds": statistics.median(times), "runs": times,
            "sent_x": max(r["sent_x"] for r in rows), "ok": all(r["ok"] for r in rows)}  # fmt: skip


if __name__ == "__main__":
    main()
