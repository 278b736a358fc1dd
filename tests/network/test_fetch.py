"""`rgt fetch` on the real sshd against a loopback Hugging Face-style endpoint: the listing API,
``resolve`` with Range, a connection dropped mid-file, a gated repo, a mirror that serves an
error page with the wrong size, and a disk that fills mid-download."""

from __future__ import annotations

import dataclasses
import hashlib
import http.server
import json
import socket
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from rgt.state.store import Store
from tests.network.helpers import profile_with, rgt
from tests.sshd import SshServer, register

CONFIG = b'{"model_type": "toy"}\n'
WEIGHTS = bytes(range(256)) * (12 * 1024)  # 3 MiB
DROP_AT = 1 << 20  # the first GET of the weights dies after 1 MiB
HTML = b"<!DOCTYPE html><html><body>mirror busy</body></html>"
FILES = {"config.json": CONFIG, "model.safetensors": WEIGHTS}
COMMIT = "c0ffee" * 6 + "abcd"


class _Hub(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    served: ClassVar[Counter[str]] = Counter()  # bytes of each file body sent
    gets: ClassVar[Counter[str]] = Counter()
    drop: ClassVar[bool] = True
    unavailable: ClassVar[int] = 0  # the next N listings answer 503

    def do_GET(self) -> None:
        parts = self.path.split("?")[0].strip("/").split("/")
        if parts[:2] == ["api", "models"] and type(self).unavailable > 0:
            type(self).unavailable -= 1
            self.send_error(503, "Service Unavailable")
            return None
        if parts[:2] == ["api", "models"] and parts[4:5] == ["tree"]:
            return self._json([_tree_entry(n) for n in FILES])  # huggingface_hub's listing
        if parts[:2] == ["api", "models"]:
            return self._listing(parts[3])
        repo, name = parts[1], parts[-1]
        if name not in FILES:
            self.send_error(404, "Entry not found")
            return None
        body = FILES[name]
        if repo == "html":
            body = HTML  # a mirror's error page, sent as if it were the file
        type(self).gets[name] += 1
        start = int(self.headers.get("Range", "bytes=0-")[6:].split("-")[0] or 0)
        self.send_response(206 if start else 200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(body) - start))
        if start:
            self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
        self.end_headers()
        chunk = body[start:]
        if name == "model.safetensors" and type(self).drop and not start:
            type(self).drop = False
            chunk = chunk[:DROP_AT]
            type(self).served[name] += len(chunk)  # counted first: the client may finish first
            self.wfile.write(chunk)
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)  # the connection drops mid-file
            return None
        type(self).served[name] += len(chunk)
        self.wfile.write(chunk)
        return None

    def do_HEAD(self) -> None:
        """What ``huggingface_hub`` asks before a download: the commit, the etag, the size."""
        name = self.path.split("?")[0].rsplit("/", 1)[-1]
        if name not in FILES:
            self.send_error(404, "Entry not found")
            return
        body = FILES[name]
        self.send_response(200)
        self.send_header("X-Repo-Commit", COMMIT)
        self.send_header("ETag", f'"{hashlib.sha256(body).hexdigest()}"')
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()

    def _listing(self, repo: str) -> None:
        if repo == "gated":
            self.send_error(401, "Unauthorized")
            return
        if repo == "missing":
            self.send_error(404, "Repository not found")
            return
        weights = {
            "sha256": hashlib.sha256(WEIGHTS).hexdigest(),
            "size": len(WEIGHTS),
            "pointerSize": 134,
        }
        doc = {
            "id": f"org/{repo}",
            "sha": COMMIT,
            "siblings": [
                {"rfilename": "config.json", "size": len(CONFIG)},
                {"rfilename": "model.safetensors", "size": len(WEIGHTS), "lfs": weights},
                {"rfilename": "README.md", "size": 10},
            ],
        }
        self._json(doc)

    def _json(self, doc: Any) -> None:
        body = json.dumps(doc).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def _tree_entry(name: str) -> dict[str, Any]:
    body = FILES[name]
    entry: dict[str, Any] = {"type": "file", "path": name, "size": len(body), "oid": "0" * 40}
    if name == "model.safetensors":
        entry["lfs"] = {"oid": hashlib.sha256(body).hexdigest(), "size": len(body),
                        "pointerSize": 134}  # fmt: skip
    return entry


@pytest.fixture(scope="module")
def hub() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def box(sshd_server: SshServer, tmp_path: Path, hub: str) -> Path:
    # Jobs get HF_ENDPOINT from the plan; the stdlib path even where the machine's python has
    # huggingface_hub (that path: test_the_hub_library_is_used_when_the_interpreter_has_it).
    profile_with(network={"hf_endpoint": hub}, env={"RGT_FETCH_HUB": "0"})
    register(sshd_server, "box", tmp_path / "data")
    _Hub.served.clear()
    _Hub.gets.clear()
    return tmp_path / "data"


def fetch(*args: str, stdin: str = "") -> tuple[int, dict[str, Any]]:
    proc = rgt("fetch", "box", *args, "--wait", "90", "--json", stdin=stdin)
    return proc.returncode, json.loads(proc.stdout or "{}")


@pytest.mark.slow
def test_fetch_resumes_after_a_drop_and_never_downloads_a_complete_file_again(box: Path) -> None:
    _Hub.drop = True
    code, data = fetch("hf://org/toy", "--include", "*.json", "--include", "*.safetensors")
    assert code == 0, data
    to = Path(data["to"])
    assert to == box / "models" / "org" / "toy"
    assert (to / "model.safetensors").read_bytes() == WEIGHTS
    assert (to / "config.json").read_bytes() == CONFIG and not (to / "README.md").exists()
    assert _Hub.gets["model.safetensors"] == 2  # the dropped GET, then one Range resume
    assert _Hub.served["model.safetensors"] == len(WEIGHTS)  # no byte sent twice
    assert "retry 1/5 of model.safetensors" in data["log_tail"]
    record = json.loads((to / ".rgt-fetch.json").read_text())
    assert record["revision"].startswith("c0ffee") and len(record["files"]) == 2

    code, data = fetch("hf://org/toy", "--include", "*.safetensors")
    assert code == 0 and "have model.safetensors" in data["log_tail"]
    assert _Hub.gets["model.safetensors"] == 2  # verified by sha256, not fetched again


@pytest.mark.slow
def test_gated_html_and_disk_full_fail_clearly(box: Path, small_tmpfs: Any) -> None:
    code, data = fetch("hf://org/gated", "--token-stdin", stdin="hf_not_a_real_token\n")
    assert code == 1 and "gated or private and needs a token" in data["log_tail"]
    assert "hf_not_a_real_token" not in json.dumps(data)

    code, data = fetch("hf://org/html", "--include", "config.json")
    assert code == 1 and "the hub publishes" in data["log_tail"], data

    _Hub.drop = False
    small = small_tmpfs("1m", 100)
    code, data = fetch("hf://org/toy", "--include", "*.safetensors", "--to", str(small / "m"))
    assert code == 1 and "disk full writing model.safetensors" in data["log_tail"], data
    assert (small / "m" / "model.safetensors.part").stat().st_size > 0  # the partial is kept
    assert _Hub.gets["model.safetensors"] == 1  # no retry loop


@pytest.fixture
def stdlib_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """The stdlib fallback, also where this interpreter has huggingface_hub."""
    monkeypatch.setenv("RGT_FETCH_HUB", "0")


@pytest.mark.usefixtures("stdlib_path")
def test_a_plain_url_resumes_after_a_drop_in_process(
    hub: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The downloader itself (the code the machine runs) on an https-style URL: no listing, the
    size from Content-Length/Content-Range, one drop, no byte sent twice."""
    from rgt.fetch import downloader

    monkeypatch.setattr(downloader, "BACKOFF_S", 0.01)
    _Hub.drop, _Hub.served, _Hub.gets = True, Counter(), Counter()
    url = f"{hub}/org/toy/resolve/main/model.safetensors"
    assert downloader.main([url, "--to", str(tmp_path / "d")]) == 0
    assert (tmp_path / "d" / "model.safetensors").read_bytes() == WEIGHTS
    assert _Hub.gets["model.safetensors"] == 2 and _Hub.served["model.safetensors"] == len(WEIGHTS)
    assert downloader.main([url, "--to", str(tmp_path / "d")]) == 0
    assert _Hub.gets["model.safetensors"] == 3  # no published sha256: fetched again, overwritten


@pytest.mark.usefixtures("stdlib_path")
def test_a_part_left_by_an_earlier_run_is_resumed_and_verified(
    hub: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rgt.fetch import downloader

    monkeypatch.setenv("HF_ENDPOINT", hub)
    _Hub.drop, _Hub.served, _Hub.gets = False, Counter(), Counter()
    (tmp_path / "model.safetensors.part").write_bytes(WEIGHTS[:DROP_AT])
    args = ["hf://org/toy", "--include", "*.safetensors", "--to", str(tmp_path)]
    assert downloader.main(args) == 0
    assert _Hub.served["model.safetensors"] == len(WEIGHTS) - DROP_AT  # only the missing tail
    assert (tmp_path / "model.safetensors").read_bytes() == WEIGHTS
    (tmp_path / "model.safetensors").unlink()  # a corrupt earlier part: the sha256 catches it
    (tmp_path / "model.safetensors.part").write_bytes(b"\0" * DROP_AT)
    assert downloader.main(args) == 1
    assert not (tmp_path / "model.safetensors.part").exists()  # wrong bytes are not resumed


@pytest.mark.usefixtures("stdlib_path")
def test_an_unknown_repo_is_a_clear_404(
    hub: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from rgt.fetch import downloader

    monkeypatch.setenv("HF_ENDPOINT", hub)
    assert downloader.main(["hf://org/missing", "--to", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "HTTP 404 for " in out and "no such repo, revision or file" in out
    assert list(tmp_path.iterdir()) == []  # nothing written, no retry


def test_the_hub_library_is_used_when_the_interpreter_has_it(
    hub: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("huggingface_hub", reason="huggingface_hub is not installed in this venv")
    from rgt.fetch import downloader

    monkeypatch.setenv("HF_ENDPOINT", hub)
    monkeypatch.delenv("RGT_FETCH_HUB", raising=False)
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    _Hub.drop, _Hub.gets = False, Counter()
    args = ["hf://org/toy", "--include", "*.json", "--include", "*.safetensors"]
    assert downloader.main([*args, "--to", str(tmp_path / "m")]) == 0
    assert "with huggingface_hub" in capsys.readouterr().out
    assert (tmp_path / "m" / "model.safetensors").read_bytes() == WEIGHTS
    assert (tmp_path / "m" / "config.json").read_bytes() == CONFIG
    record = json.loads((tmp_path / "m" / ".rgt-fetch.json").read_text())
    assert record["revision"] == COMMIT and {f["name"] for f in record["files"]} == set(FILES)
    assert _Hub.gets["model.safetensors"] == 1
    assert downloader.main(["hf://org/missing", "--to", str(tmp_path / "x")]) == 1
    assert "no such repo, revision or file" in capsys.readouterr().out


@pytest.mark.slow
def test_rgt_fetch_with_the_hub_library_on_the_machine_resumes_a_drop(
    sshd_server: SshServer, tmp_path: Path, hub: str
) -> None:
    """The machine's interpreter has huggingface_hub: `rgt fetch` on the sshd machine goes
    through it (its own Range resume), survives the dropped connection, and a second fetch
    finds the files complete."""
    pytest.importorskip("huggingface_hub", reason="huggingface_hub is not installed in this venv")
    profile_with(network={"hf_endpoint": hub}, env={"HF_HUB_DISABLE_TELEMETRY": "1"})
    machine = register(sshd_server, "box", tmp_path / "data")
    with_hub = {**machine.connection, "python": sys.executable}  # this venv's, which has it
    Store.open().add_machine(dataclasses.replace(machine, connection=with_hub))
    _Hub.drop, _Hub.served, _Hub.gets = True, Counter(), Counter()
    code, data = fetch("hf://org/toy", "--include", "*.json", "--include", "*.safetensors")
    assert code == 0, data
    assert "with huggingface_hub" in data["log_tail"]
    to = Path(data["to"])
    assert (to / "model.safetensors").read_bytes() == WEIGHTS
    assert (to / "config.json").read_bytes() == CONFIG and not (to / "README.md").exists()
    assert _Hub.gets["model.safetensors"] == 2  # the dropped GET, then one more
    # The library resumes from its last whole chunk (10 MiB in huggingface_hub 2.x): a drop
    # inside the first chunk, as here, sends the lost part again, never more.
    assert _Hub.served["model.safetensors"] <= len(WEIGHTS) + DROP_AT
    code, data = fetch("hf://org/toy", "--include", "*.safetensors")
    assert code == 0, data
    assert _Hub.gets["model.safetensors"] == 2  # complete: not fetched again


def test_the_hub_library_path_retries_a_hub_that_is_briefly_unavailable(
    hub: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two 503s from the hub: rgt's own retry with backoff around the library, then the files;
    a 404 is not retried."""
    pytest.importorskip("huggingface_hub", reason="huggingface_hub is not installed in this venv")
    from rgt.fetch import downloader

    monkeypatch.setenv("HF_ENDPOINT", hub)
    monkeypatch.delenv("RGT_FETCH_HUB", raising=False)
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    monkeypatch.setenv("RGT_FETCH_BACKOFF_S", "0.01")
    _Hub.drop, _Hub.gets, _Hub.unavailable = False, Counter(), 2
    try:
        args = ["hf://org/toy", "--include", "*.safetensors", "--to", str(tmp_path / "m")]
        assert downloader.main(args) == 0
    finally:
        _Hub.unavailable = 0
    out = capsys.readouterr().out
    assert "retry 1/5 of hf://org/toy" in out and "retry 2/5 of hf://org/toy" in out, out
    assert "retry 3/5" not in out
    assert (tmp_path / "m" / "model.safetensors").read_bytes() == WEIGHTS
    assert downloader.main(["hf://org/missing", "--to", str(tmp_path / "x")]) == 1
    assert "retry" not in capsys.readouterr().out  # a missing repo fails at once
