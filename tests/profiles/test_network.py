"""The network plan from a profile's ``[network]`` section, applied to real jobs.

The no_proxy test is the trap AutoDL's profile documents: its accelerator (``source
/etc/network_turbo``) exports ``http_proxy`` for the whole shell, and a job then sends its
requests to local services through the proxy. A real forward proxy on loopback counts what it
is asked for.
"""

from __future__ import annotations

import http.server
import json
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest

from rgt.backends import backend_for
from rgt.errors import UsageError
from rgt.jobs.launch import LaunchOptions, launch, wait
from rgt.lifecycle.machines import register
from rgt.profiles import load_profile
from rgt.profiles.network import parse_mirrors, plan_network
from rgt.state.store import Store


def test_autodl_jobs_get_the_mirrors_and_keep_local_traffic_off_the_proxy() -> None:
    plan = plan_network(load_profile("autodl").raw["network"], "autodl")
    assert plan.env["HF_ENDPOINT"] == "https://hf-mirror.com"
    assert plan.env["PIP_INDEX_URL"] == "https://pypi.tuna.tsinghua.edu.cn/simple"
    assert plan.env["HF_HUB_DISABLE_XET"] == "1"  # [network.env], as written
    assert "PIP_TRUSTED_HOST" not in plan.env  # https needs no trust exception
    hosts = plan.env["no_proxy"].split(",")
    assert hosts[:3] == ["localhost", "127.0.0.1", "::1"]
    assert {"hf-mirror.com", "pypi.tuna.tsinghua.edu.cn"} <= set(hosts)
    assert plan.env["NO_PROXY"] == plan.env["no_proxy"]
    assert plan.source == "profile autodl"


def test_a_profile_without_mirrors_adds_nothing() -> None:
    plan = plan_network(load_profile("runpod").raw["network"], "runpod")
    assert plan.env == {} and plan.notes() == []


def test_user_mirrors_override_the_profile_and_plain_http_is_trusted_for_pip() -> None:
    raw = load_profile("autodl").raw["network"]
    plan = plan_network(raw, "autodl", {"pip": "http://10.1.2.3:8080/simple"})
    assert plan.env["PIP_INDEX_URL"] == "http://10.1.2.3:8080/simple"
    assert plan.env["PIP_TRUSTED_HOST"] == "10.1.2.3"
    assert plan.env["HF_ENDPOINT"] == "https://hf-mirror.com"  # the profile's, kept
    assert "10.1.2.3" in plan.env["no_proxy"].split(",")
    assert plan_network(raw, "autodl", enabled=False).env == {}


@pytest.mark.parametrize(
    "bad", ["hf", "hf=", "npm=https://x", "hf=ftp://x", "hf=https://a b", "pip=https://"]
)
def test_bad_mirror_arguments_are_usage_errors(bad: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_mirrors([bad])
    assert caught.value.fix


class _Counter(http.server.BaseHTTPRequestHandler):
    """Answers every GET (as a proxy it is asked for absolute URLs) and counts them."""

    seen: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        type(self).seen.append(self.path)
        body = b"via " + self.server.server_address[0].encode()  # type: ignore[union-attr]
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def servers() -> Iterator[tuple[int, int, list[str]]]:
    """(local service port, proxy port, what the proxy was asked for)."""
    proxy_seen: list[str] = []
    proxy_handler = type("Proxy", (_Counter,), {"seen": proxy_seen})
    started = [
        http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        for handler in (type("Service", (_Counter,), {"seen": []}), proxy_handler)
    ]
    for server in started:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    yield started[0].server_address[1], started[1].server_address[1], proxy_seen
    for server in started:
        server.shutdown()
        server.server_close()


JOB = """
import json, os, sys, urllib.request
keys = ("HF_ENDPOINT", "PIP_INDEX_URL", "no_proxy", "MY_VAR")
env = {k: os.environ.get(k) for k in keys}
env["local"] = urllib.request.urlopen(sys.argv[1], timeout=10).read().decode()
with open(os.path.join(os.environ["RGT_OUTPUT_DIR"], "env.json"), "w") as out:
    json.dump(env, out)
"""


def _run(store: Store, machine: str, project: Path, service: int, **env: str) -> dict[str, str]:
    options = LaunchOptions(
        command=(sys.executable, "job.py", f"http://127.0.0.1:{service}/metrics"),
        cwd=project,
        env=env,
    )
    record = launch(store, machine, options)
    status = wait(store, record.job_id, poll=0.2, timeout=120)
    job_dir = Path(backend_for(store, machine).job_paths(record.job_id).root)
    assert status["state"] == "succeeded", (job_dir / "logs").exists()
    doc: dict[str, str] = json.loads((job_dir / "outputs" / "env.json").read_text())
    return doc


@pytest.mark.slow  # > 1 s on two cores
def test_jobs_get_the_plan_and_the_proxy_trap_is_closed(
    tmp_path: Path, servers: tuple[int, int, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    service, proxy, proxy_seen = servers
    # What the platform's accelerator leaves in every shell, the agent's included.
    monkeypatch.setenv("http_proxy", f"http://127.0.0.1:{proxy}")
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.delenv("NO_PROXY", raising=False)
    project = tmp_path / "proj"
    project.mkdir()
    (project / "job.py").write_text(JOB)
    store = Store.open()
    mirror = "http://127.0.0.1:9/hf"
    result = register(store, "local", "m1", root=str(tmp_path / "r1"), mirrors={"hf": mirror})
    assert any("HF_ENDPOINT=http://127.0.0.1:9/hf" in note for note in result.notes)

    env = _run(store, "m1", project, service, MY_VAR="x")
    assert env["HF_ENDPOINT"] == mirror and env["MY_VAR"] == "x"
    assert env["local"] == "via 127.0.0.1" and proxy_seen == []  # no_proxy kept it local

    env = _run(store, "m1", project, service, HF_ENDPOINT="https://huggingface.co")
    assert env["HF_ENDPOINT"] == "https://huggingface.co"  # the job's --env wins

    register(store, "local", "m2", root=str(tmp_path / "r2"), no_mirrors=True)
    env = _run(store, "m2", project, service)
    assert env["HF_ENDPOINT"] is None and env["no_proxy"] is None
    assert len(proxy_seen) == 1 and proxy_seen[0].endswith("/metrics")  # the trap, unguarded


def test_mirror_and_no_mirrors_together_are_refused_before_anything_is_registered(
    tmp_path: Path,
) -> None:
    store = Store.open()
    with pytest.raises(UsageError):
        register(
            store, "local", "m", root=str(tmp_path), mirrors={"hf": "https://x"}, no_mirrors=True
        )
    assert [m.name for m in store.machines()] == []
