"""The platform accelerator (a hook that exports ``http_proxy``, like AutoDL's
``source /etc/network_turbo``) is on for rgt's downloader only, and only for the kinds the plan
lists; ``no_proxy`` keeps localhost and the mirrors off it. A real forward proxy on loopback."""

from __future__ import annotations

import http.server
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from rgt.fetch import downloader
from rgt.profiles.network import plan_network
from tests.network.proxy import forward_proxy
from tests.network.test_fetch import CONFIG, _Hub

PROXY_VARS = ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY")


@pytest.fixture(scope="module")
def far_hub() -> Iterator[str]:
    """The hub on 127.0.0.2: loopback, but not a host the plan's no_proxy lists."""
    server = http.server.ThreadingHTTPServer(("127.0.0.2", 0), _Hub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.2:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _env(monkeypatch: pytest.MonkeyPatch, hook: str, **env: str) -> None:
    for name in (*PROXY_VARS, "no_proxy", "NO_PROXY"):
        monkeypatch.setenv(name, "")  # recorded, so the downloader's own setting is undone too
        monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("RGT_PROXY_HOOK", hook)
    monkeypatch.setenv("RGT_FETCH_HUB", "0")  # the stdlib path (the hub library: test_fetch)


def test_the_hook_is_sourced_for_the_download_only_and_no_proxy_keeps_local_hosts_off(
    far_hub: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _Hub.drop, _Hub.gets = False, Counter()
    with forward_proxy() as (proxy, seen):
        turbo = tmp_path / "network_turbo"
        turbo.write_text(f"export http_proxy={proxy}\nexport no_proxy=modelscope.com\n")
        args = ["hf://org/toy", "--include", "config.json"]
        plan = plan_network({"proxy_hook": f"source {turbo}"}, "autodl", routes={
            "hf": {"chosen": "accelerator", "base": far_hub}})  # fmt: skip
        assert "http_proxy" not in plan.env  # a job never runs under the accelerator
        _env(monkeypatch, plan.env["RGT_PROXY_HOOK"], **plan.env)
        assert downloader.main([*args, "--to", str(tmp_path / "a")]) == 0
        assert (tmp_path / "a" / "config.json").read_bytes() == CONFIG
        assert [u.split("?")[0] for u in seen] == [
            f"{far_hub}/api/models/org/toy/revision/main",
            f"{far_hub}/org/toy/resolve/{'c0ffee' * 6 + 'abcd'}/config.json",
        ]
        import os

        assert os.environ["http_proxy"] == proxy
        assert set(os.environ["no_proxy"].split(",")) >= {
            "localhost",
            "127.0.0.1",
            "modelscope.com",
        }

        seen.clear()  # the mirror (127.0.0.1, in the plan's no_proxy) stays off the proxy
        near = far_hub.replace("127.0.0.2", "127.0.0.1")
        with http_server_on(near) as base:
            _env(monkeypatch, f"source {turbo}", RGT_ACCELERATE="hf,url", HF_ENDPOINT=base,
                 no_proxy="localhost,127.0.0.1,::1")  # fmt: skip
            assert downloader.main([*args, "--to", str(tmp_path / "b")]) == 0
        assert seen == []

        _env(monkeypatch, f"source {turbo}", RGT_ACCELERATE="url", HF_ENDPOINT=far_hub)
        assert downloader.main([*args, "--to", str(tmp_path / "c")]) == 0
        assert seen == []  # hf not listed: not accelerated
        assert "http_proxy" not in os.environ


class http_server_on:
    """The hub on 127.0.0.1 (a free port)."""

    def __init__(self, _hint: str) -> None:
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hub)

    def __enter__(self) -> str:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_a_hook_that_exports_no_proxy_means_direct(
    far_hub: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _Hub.drop = False
    _env(monkeypatch, "true", RGT_ACCELERATE="hf,url", HF_ENDPOINT=far_hub)
    assert downloader.main(["hf://org/toy", "--include", "config.json", "--to", str(tmp_path)]) == 0
    assert "exported no http(s)_proxy: going direct" in capsys.readouterr().out


def test_routes_of_the_audit_are_applied_and_the_user_flags_win() -> None:
    raw = {"hf_endpoint": "https://hf-mirror.com", "pip_index": "https://mirror/simple",
           "proxy_hook": "source /etc/network_turbo"}  # fmt: skip
    routes = {"hf": {"chosen": "accelerator", "base": "https://huggingface.co"},
              "pip": {"chosen": "direct", "base": "https://pypi.org/simple"}}  # fmt: skip
    plan = plan_network(raw, "autodl", routes=routes)
    assert plan.env["HF_ENDPOINT"] == "https://huggingface.co"
    assert plan.env["PIP_INDEX_URL"] == "https://pypi.org/simple"
    assert plan.env["RGT_ACCELERATE"] == "hf,url"
    assert "huggingface.co" not in plan.env["no_proxy"]  # the accelerator must see it
    assert "pypi.org" in plan.env["no_proxy"] and "routes of the last audit" in plan.source
    pinned = plan_network(raw, "autodl", {"hf": "https://other"}, routes=routes)
    assert pinned.env["HF_ENDPOINT"] == "https://other" and pinned.env["RGT_ACCELERATE"] == "url"
    assert plan_network(raw, "autodl", enabled=False, routes=routes).env == {}
