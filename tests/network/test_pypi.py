"""A simple PyPI index (PEP 503) on loopback serving a real wheel, built here with `pip wheel`
from a two-file package (no network), to `pip download` through the plan's PIP_INDEX_URL."""

from __future__ import annotations

import http.server
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest

from rgt.profiles.network import plan_network

SETUP = "from setuptools import setup\nsetup(name='rgt-toy', version='0.1', py_modules=['rgt_toy'])"


class _Index(http.server.BaseHTTPRequestHandler):
    wheel: ClassVar[Path]
    seen: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        type(self).seen.append(self.path)
        name = self.wheel.name
        pages = {
            "/simple/rgt-toy/": f'<a href="/files/{name}">{name}</a>'.encode(),
            f"/files/{name}": self.wheel.read_bytes(),
            "/simple/pip/": b"<html><body></body></html>",  # what the audit's probe reads
        }
        body = pages.get(self.path)
        if body is None:
            self.send_error(404)
            return
        self.send_response(200)
        kind = "text/html" if "simple" in self.path else "application/zip"
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path, list[str]]]:
    src = tmp_path_factory.mktemp("pkg")
    (src / "setup.py").write_text(SETUP)
    (src / "rgt_toy.py").write_text("ANSWER = 42\n")
    dist = tmp_path_factory.mktemp("dist")
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input"]
    build = [*pip, "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w", str(dist)]
    subprocess.run([*build, str(src)], check=True, capture_output=True, timeout=120)
    (wheel,) = dist.glob("rgt_toy-0.1-*.whl")
    handler = type("Index", (_Index,), {"wheel": wheel, "seen": []})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", wheel, handler.seen
    server.shutdown()
    server.server_close()


@pytest.mark.slow
def test_pip_download_gets_the_real_wheel_through_the_plans_index(
    index: tuple[str, Path, list[str]], tmp_path: Path
) -> None:
    base, wheel, seen = index
    plan = plan_network({"pip_index": f"{base}/simple"}, "generic-ssh")
    assert plan.env["PIP_TRUSTED_HOST"] == "127.0.0.1"  # plain http: pip needs it
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), **plan.env}
    argv = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-cache-dir",
            "download", "--no-deps", "-d", str(tmp_path / "got"), "rgt-toy"]  # fmt: skip
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "got" / wheel.name).read_bytes() == wheel.read_bytes()
    assert seen == ["/simple/rgt-toy/", f"/files/{wheel.name}"]
