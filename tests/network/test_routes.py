"""Route probing in `rgt audit`, from the machine (the real sshd on this box): loopback HTTP
servers are the mirrors, a closed port is the unreachable route."""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest

from tests.network.helpers import profile_with, rgt
from tests.network.proxy import forward_proxy
from tests.network.test_pypi import index  # noqa: F401  (the fixture)
from tests.sshd import SshServer, free_port, register

BODY = bytes(range(256)) * 2048  # 512 KiB: more than the probe reads


class _Files(http.server.BaseHTTPRequestHandler):
    """Any path is BODY; honours ``Range: bytes=A-B``; counts requests."""

    seen: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        type(self).seen.append(self.path)
        first, last = 0, len(BODY) - 1
        wanted = self.headers.get("Range", "")
        if wanted.startswith("bytes="):
            a, _sep, b = wanted[6:].partition("-")
            first, last = int(a), min(int(b or last), last)
        self.send_response(206 if wanted else 200)
        self.send_header("Content-Length", str(last - first + 1))
        self.end_headers()
        self.wfile.write(BODY[first : last + 1])

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def mirror() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Files)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_audit_times_each_route_from_the_machine_and_chooses_the_one_that_answers(
    sshd_server: SshServer, tmp_path: Path, mirror: str
) -> None:
    dead = f"http://127.0.0.1:{free_port()}"  # nothing listens: the blocked route
    profile_with(
        network={
            "hf_endpoint": mirror,  # the mirror answers, huggingface.co does not
            "hf_direct": dead,
            "pip_index": f"{dead}/simple",  # the pip mirror is dead, the direct route answers
            "pip_direct": f"{mirror}/simple",
        }
    )
    register(sshd_server, "box", tmp_path / "data")
    _Files.seen.clear()
    data = json.loads(rgt("audit", "box", "--json").stdout)
    hf, pip = data["routes"]["hf"], data["routes"]["pip"]
    assert hf["chosen"] == "mirror" and pip["chosen"] == "direct"
    ok = {r["label"]: r for r in hf["routes"]}["mirror"]
    assert ok["bytes"] == 256 * 1024 and ok["ttfb_ms"] > 0 and ok["rate_kib_s"] > 0
    assert ok["url"] == f"{mirror}/openai-community/gpt2/resolve/main/vocab.json"
    assert "mirror is fastest" in hf["why"] and "direct: failed" in hf["why"]
    assert "refused" in {r["label"]: r for r in hf["routes"]}["direct"]["error"].lower()
    assert sorted(_Files.seen) == ["/openai-community/gpt2/resolve/main/vocab.json", "/simple/pip/"]
    (warn,) = [f for f in data["findings"] if f["check"].startswith("route")]
    assert warn["check"] == "route pip" and "does not answer" in warn["finding"]
    assert "--no-mirrors" in warn["fix"] and "--mirror pip=URL" in warn["fix"]
    # The choice is applied: a job on the machine gets the route that answered, no --env.
    env = job_env("box")
    assert env["HF_ENDPOINT"] == mirror and env["PIP_INDEX_URL"] == f"{mirror}/simple"


ENV_JOB = (
    "import json, os; keys = ('HF_ENDPOINT', 'PIP_INDEX_URL', 'no_proxy', 'PIP_PROXY', "
    "'http_proxy'); "
    "open(os.path.join(os.environ['RGT_OUTPUT_DIR'], 'env.json'), 'w')"
    ".write(json.dumps({k: os.environ.get(k) for k in keys}))"
)


def job_env(machine: str) -> dict[str, str]:
    import sys

    from rgt.backends import backend_for
    from rgt.jobs.launch import LaunchOptions, launch, wait
    from rgt.state.store import Store

    store = Store.open()
    options = LaunchOptions(command=(sys.executable, "-c", ENV_JOB), cwd=Path(__file__).parent)
    record = launch(store, machine, options)
    assert wait(store, record.job_id, poll=0.2, timeout=120)["state"] == "succeeded"
    root = Path(backend_for(store, machine).job_paths(record.job_id).root)
    doc: dict[str, str] = json.loads((root / "outputs" / "env.json").read_text())
    return doc


@pytest.mark.slow
def test_pip_reaches_a_blocked_index_through_the_accelerator_and_nothing_else_does(
    sshd_server: SshServer,
    tmp_path: Path,
    index: tuple[str, Path, list[str]],  # noqa: F811
) -> None:
    """The direct index resolves only through the platform's accelerator (a forward proxy
    that knows ``pypi.invalid``), the mirror is dead: the audit chooses the accelerator for
    pip, and a job gets ``PIP_PROXY`` (pip alone goes through it), never ``http_proxy``; a
    real `pip download` with the job's variables then gets the wheel through the proxy."""
    base, wheel, _seen = index
    dead = f"http://127.0.0.1:{free_port()}"
    hidden = "pypi.invalid"
    with forward_proxy({hidden: base.removeprefix("http://")}) as (proxy, asked):
        turbo = tmp_path / "network_turbo"
        turbo.write_text(f"export http_proxy={proxy} https_proxy={proxy}\n")
        profile_with(network={"pip_index": f"{dead}/simple", "pip_direct": f"http://{hidden}/simple",
                              "proxy_hook": f"source {turbo}"})  # fmt: skip
        register(sshd_server, "box", tmp_path / "data")
        data = json.loads(rgt("audit", "box", "--json").stdout)
        pip = data["routes"]["pip"]
        assert pip["chosen"] == "accelerator", pip["why"]
        env = job_env("box")
        assert env["PIP_PROXY"] == proxy and env["http_proxy"] is None
        assert env["PIP_INDEX_URL"] == f"http://{hidden}/simple"
        asked.clear()
        argv = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-cache-dir",
                "download", "--no-deps", "-d", str(tmp_path / "got"), "rgt-toy"]  # fmt: skip
        keep = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}
        plan = {k: v for k, v in env.items() if v is not None}
        plan["PIP_TRUSTED_HOST"] = hidden  # plain http (what the plan sets for such an index)
        done = subprocess.run(argv, env={**keep, **plan}, capture_output=True, text=True,
                              timeout=120)  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert (tmp_path / "got" / wheel.name).read_bytes() == wheel.read_bytes()
        assert asked == [f"http://{hidden}/simple/rgt-toy/", f"http://{hidden}/files/{wheel.name}"]
