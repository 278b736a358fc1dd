"""A local fake of Kaggle's kernel API that really runs each pushed kernel as a process.

Shapes, as rgt.notebooks.kaggle_api sends and reads them, come from Kaggle/kaggle-api
(``src/kaggle/api/kaggle_api_extended.py``: ``kernels_push`` builds ``ApiSaveKernelRequest``,
``kernels_status`` ``ApiGetKernelSessionStatusRequest``, ``kernels_output``
``ApiListKernelSessionOutputRequest`` and fetches each file's ``url`` with a plain GET;
kagglesdk serialises them camelCase and POSTs them to ``/v1/<service>/<Method>``), and from
``docs/kernels_metadata.md``. Status values are kagglesdk's ``KernelWorkerStatus``. Kaggle's
exact words for a run stopped at its time limit are not documented: ``TIME_LIMIT_MESSAGE`` is
this fake's, and rgt matches "time limit" loosely.

Each push is a version: its text runs as ``python script.py`` in ``<base>/<slug>/v<N>`` with
``RGT_KAGGLE_WORKING`` as its /kaggle/working and ``RGT_KAGGLE_INPUT`` as /kaggle/input, where
every kernel source's latest output is copied under ``<kernel-slug>/``. A version running past
``time_limit_s`` is killed (its process group) and ends ``ERROR`` with the message; its output
is kept. Requests need HTTP basic auth; ``throttle`` answers that many 429s with Retry-After
first. Every request line and body is logged (``received``) so a test can look for a key.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote

TIME_LIMIT_MESSAGE = "Your notebook was stopped because it exceeded the max time limit"


@dataclass
class Version:
    number: int
    dir: Path
    proc: subprocess.Popen[bytes]
    started: float
    killed: bool = False

    @property
    def working(self) -> Path:
        return self.dir / "working"


@dataclass
class FakeKaggle:
    base: Path
    user: str
    key: str
    time_limit_s: float = 60.0
    throttle: int = 0
    throttled: int = 0
    kernels: dict[str, list[Version]] = field(default_factory=dict)
    pushes: list[dict[str, Any]] = field(default_factory=list)
    received: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    url: str = ""

    # -- kernels -------------------------------------------------------------------------

    def push(self, body: dict[str, Any]) -> dict[str, Any]:
        slug = str(body["slug"])
        versions = self.kernels.setdefault(slug, [])
        number = len(versions) + 1
        vdir = self.base / slug.replace("/", "__") / f"v{number}"
        (vdir / "working").mkdir(parents=True)
        (vdir / "input").mkdir()
        for source in body.get("kernelDataSources") or []:
            done = self.kernels.get(source) or []
            if done:
                self.wait(done[-1])
                shutil.copytree(done[-1].working, vdir / "input" / source.split("/")[1])
        (vdir / "script.py").write_text(body["text"])
        env = {
            "PATH": os.environ["PATH"],
            "RGT_KAGGLE_WORKING": str(vdir / "working"),
            "RGT_KAGGLE_INPUT": str(vdir / "input"),
        }
        log = (vdir / "kernel.log").open("wb")
        proc = subprocess.Popen(
            [sys.executable, "script.py"],
            cwd=vdir,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        version = Version(number, vdir, proc, time.monotonic())
        versions.append(version)
        threading.Thread(target=self.wait, args=(version,), daemon=True).start()  # the limit
        self.pushes.append(body)
        return {"ref": f"/code/{slug}", "url": f"https://www.kaggle.com/code/{slug}",
                "versionNumber": number, "error": None}  # fmt: skip

    def enforce(self, version: Version) -> None:
        if version.proc.poll() is None and time.monotonic() - version.started > self.time_limit_s:
            kill_tree(version.proc.pid)  # Kaggle stops the whole session, not one group
            version.proc.wait()
            version.killed = True

    def wait(self, version: Version) -> None:
        while version.proc.poll() is None:
            self.enforce(version)
            time.sleep(0.05)

    def status(self, slug: str) -> dict[str, Any]:
        version = self.kernels[slug][-1]
        self.enforce(version)
        if version.proc.poll() is None:
            return {"status": "RUNNING", "failureMessage": ""}
        if version.killed:
            return {"status": "ERROR", "failureMessage": TIME_LIMIT_MESSAGE}
        if version.proc.returncode:
            return {"status": "ERROR", "failureMessage": f"exit {version.proc.returncode}"}
        return {"status": "COMPLETE", "failureMessage": ""}

    def output(self, slug: str) -> dict[str, Any]:
        version = self.kernels[slug][-1]
        files = []
        for path in sorted(version.working.rglob("*")):
            if path.is_file() and not path.is_symlink():
                rel = path.relative_to(version.working).as_posix()
                url = f"{self.url}/download/{slug}/{version.number}/{rel}"
                files.append({"fileName": rel, "url": url})
        log = (version.dir / "kernel.log").read_text(errors="replace")
        return {"files": files, "log": log, "nextPageToken": ""}

    def download(self, path: str) -> bytes | None:
        owner, name, number, rel = path.split("/", 3)
        versions = self.kernels.get(f"{owner}/{name}") or []
        target = versions[int(number) - 1].working / unquote(rel) if versions else None
        return target.read_bytes() if target and target.is_file() else None

    def stop(self) -> None:
        for versions in self.kernels.values():
            for v in versions:
                if v.proc.poll() is None:
                    kill_tree(v.proc.pid)
                    v.proc.wait()


def kill_tree(pid: int) -> None:
    """SIGKILL ``pid`` and every descendant (the agent starts the job in its own session)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    todo, found = [pid], []
    while todo:
        found.append(todo.pop())
        todo += children.get(found[-1], [])
    for each in found:
        with contextlib.suppress(ProcessLookupError):
            os.kill(each, signal.SIGKILL)


class Handler(BaseHTTPRequestHandler):
    fake: FakeKaggle

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if not self._gate(raw):
            return
        method = self.path.rsplit("/", 1)[-1]
        body = json.loads(raw or b"{}")
        slug = f"{body.get('userName')}/{body.get('kernelSlug')}"
        with self.fake.lock:
            if method == "SaveKernel":
                self._json(200, self.fake.push(body))
            elif slug not in self.fake.kernels:
                self._json(404, {"message": f"kernel {slug} not found"})
            elif method == "GetKernelSessionStatus":
                self._json(200, self.fake.status(slug))
            elif method == "ListKernelSessionOutput":
                self._json(200, self.fake.output(slug))
            else:
                self._json(404, {"message": f"no method {method}"})

    def do_GET(self) -> None:
        if not self._gate(b"") or not self.path.startswith("/download/"):
            return self._json(404, {}) if self.path else None
        data = self.fake.download(self.path[len("/download/") :])
        if data is None:
            return self._json(404, {"message": "no such file"})
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        return None

    def _gate(self, raw: bytes) -> bool:
        """Log the request, then answer 401 without the right basic auth, 429 when told."""
        self.fake.received.append(f"{self.command} {self.path} {raw!r}")
        token = base64.b64encode(f"{self.fake.user}:{self.fake.key}".encode()).decode()
        if self.headers.get("Authorization") != f"Basic {token}":
            self._json(401, {"message": "Unauthenticated"})
            return False
        if self.fake.throttled < self.fake.throttle:
            self.fake.throttled += 1
            self._json(429, {"message": "Too Many Requests"}, {"Retry-After": "1"})
            return False
        return True

    def _json(self, code: int, doc: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(doc).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)


def serve(fake: FakeKaggle) -> ThreadingHTTPServer:
    handler = type("BoundHandler", (Handler,), {"fake": fake})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server
