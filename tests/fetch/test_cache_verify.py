"""`rgt fetch NAME hf://ORG/MODEL --verify`: a Hugging Face cache built by huggingface_hub itself
(``hf_hub_download`` from a loopback hub: the real blobs/, snapshots/ and refs/ layout, an LFS
file's blob named by its sha256, a small file's by its git blob sha1) checked file by file; a
rotted blob, a deleted blob, a download that never finished and a link out of the cache are
each named."""

from __future__ import annotations

import hashlib
import http.server
import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rgt.fetch import cache_verify
from tests.clirun import rgt

COMMIT = "0123456789abcdef0123456789abcdef01234567"
FILES = {"config.json": b'{"model_type": "toy"}\n', "model.safetensors": bytes(range(256)) * 400}


def _git_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class _Hub(http.server.BaseHTTPRequestHandler):
    """resolve/ with HEAD and GET, as the Hub answers them: an LFS file's ETag is its sha256
    (X-Linked-Etag), a regular file's its git blob sha1."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass

    def _head(self) -> bytes | None:
        name = self.path.split("?")[0].rsplit("/", 1)[-1]
        body = FILES.get(name)
        if body is None:
            self.send_error(404, "Entry not found")
            return None
        self.send_response(200)
        self.send_header("X-Repo-Commit", COMMIT)
        if name.endswith(".safetensors"):
            self.send_header("X-Linked-Etag", f'"{hashlib.sha256(body).hexdigest()}"')
            self.send_header("X-Linked-Size", str(len(body)))
        self.send_header("ETag", f'"{_git_sha1(body)}"')
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        return body

    def do_HEAD(self) -> None:
        self._head()

    def do_GET(self) -> None:
        body = self._head()
        if body is not None:
            self.wfile.write(body)


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    hf = pytest.importorskip("huggingface_hub")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    root = tmp_path / "hf cache"
    endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        for name in FILES:
            hf.hf_hub_download("org/toy", name, cache_dir=str(root), endpoint=endpoint)
    finally:
        server.shutdown()
        server.server_close()
    yield root


def _run(
    root: Path, capsys: pytest.CaptureFixture[str], source: str = "hf://org/toy"
) -> tuple[int, dict[str, Any]]:
    code = cache_verify.main([source, "--cache", str(root)])
    return code, json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_a_whole_cache_verifies(cache: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = cache / "models--org--toy"
    blobs = sorted(p.name for p in (repo / "blobs").iterdir())
    assert blobs == sorted([hashlib.sha256(FILES["model.safetensors"]).hexdigest(),
                            _git_sha1(FILES["config.json"])])  # fmt: skip
    assert (repo / "snapshots" / COMMIT / "config.json").is_symlink()
    code, report = _run(cache, capsys)
    assert code == 0 and report["ok"] and report["counts"] == {"ok": 2}
    assert report["snapshots"] == [COMMIT]
    assert _run(cache, capsys, "hf://org/toy@main")[1]["snapshots"] == [COMMIT]  # refs/main
    assert _run(cache, capsys, "hf://org/other")[0] == 1  # no such repo in the cache


def test_each_kind_of_damage_is_named(cache: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = cache / "models--org--toy"
    weights = repo / "blobs" / hashlib.sha256(FILES["model.safetensors"]).hexdigest()
    data = bytearray(weights.read_bytes())
    data[5000] ^= 0xFF  # one flipped byte: the size is right, the content is not
    weights.write_bytes(bytes(data))
    (repo / "blobs" / _git_sha1(FILES["config.json"])).unlink()
    (repo / "blobs" / ("ab" * 32 + ".incomplete")).write_bytes(b"half")
    outside = cache.parent / "elsewhere.json"
    outside.write_text("{}")
    (repo / "snapshots" / COMMIT / "extra.json").symlink_to(outside)
    code, report = _run(cache, capsys)
    assert code == 1 and not report["ok"]
    verdicts = {p["path"]: p["verdict"] for p in report["problems"]}
    assert verdicts == {"model.safetensors": "bad", "config.json": "missing",
                        "extra.json": "outside"}  # fmt: skip
    assert report["incomplete_blobs"] == 1


@pytest.mark.slow
def test_rgt_fetch_verify_runs_on_the_machine(cache: Path, tmp_path: Path) -> None:
    assert rgt("up", "local", "--name", "me", "--root", str(tmp_path / "root")).returncode == 0
    good = rgt("fetch", "me", "hf://org/toy", "--verify", "--cache", str(cache), "--wait", "60",
               "--json")  # fmt: skip
    assert good.returncode == 0, good.stderr
    assert '"ok": true' in json.loads(good.stdout)["log_tail"]
    sha = hashlib.sha256(FILES["model.safetensors"]).hexdigest()
    weights = cache / "models--org--toy" / "blobs" / sha
    os.truncate(weights, 100)  # cut, as a full disk leaves it
    bad = rgt("fetch", "me", "hf://org/toy", "--verify", "--cache", str(cache), "--wait", "60",
              "--json")  # fmt: skip
    assert bad.returncode == 1 and '"bad"' in json.loads(bad.stdout)["log_tail"]
