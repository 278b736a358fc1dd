"""A Hugging Face Hub that accepts uploads, on 127.0.0.1: the subset of the API that
``huggingface_hub``'s upload_folder / upload_large_folder use (create repo, preupload, the
git-lfs batch API with the ``basic`` transfer, verify, the NDJSON commit). LFS bytes go to a
second server (another origin, as the Hub's storage is) that must never see the token.

``drop_puts[oid] = n``: the next n PUTs of that object are cut after half the body (the
connection closes), as a dropped upload is. Everything received is counted per object.
"""

from __future__ import annotations

import base64
import hashlib
import http.server
import json
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

TOKEN = "hf_fake_write_token_0123456789"


@dataclass
class HubState:
    storage: str = ""  # base URL of the storage server
    repos: dict[str, dict[str, bytes]] = field(default_factory=dict)  # repo -> path -> bytes
    objects: dict[str, bytes] = field(default_factory=dict)  # oid -> bytes (acknowledged)
    drop_puts: Counter[str] = field(default_factory=Counter)
    puts: Counter[str] = field(default_factory=Counter)  # PUT attempts per oid
    batches: list[list[str]] = field(default_factory=list)  # the oids of each batch request
    commits: list[list[dict[str, Any]]] = field(default_factory=list)
    requests: list[tuple[str, str, str | None]] = field(default_factory=list)  # verb, path, auth


class _Api(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    state: HubState

    def log_message(self, *args: Any) -> None:
        pass

    def _body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _json(self, code: int, doc: Any) -> None:
        raw = json.dumps(doc).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def do_POST(self) -> None:
        body = self._body()
        self.state.requests.append(("POST", self.path, self.headers.get("Authorization")))
        if self.headers.get("Authorization") != f"Bearer {TOKEN}":
            return self._json(401, {"error": "Invalid credentials"})
        parts = self.path.split("?")[0].strip("/").split("/")
        if parts == ["api", "repos", "create"]:
            doc = json.loads(body)
            repo = f"{doc['organization']}/{doc['name']}"
            if repo in self.state.repos:
                return self._json(409, {"error": "You already created this model repo"})
            self.state.repos[repo] = {}
            return self._json(200, {"url": f"https://hub/{repo}"})
        if parts[:2] == ["api", "models"] and parts[4:5] == ["preupload"]:
            files = json.loads(body)["files"]
            mode = {True: "lfs", False: "regular"}
            modes = [{"path": f["path"], "shouldIgnore": False,
                      "uploadMode": mode[f["size"] >= 1024]} for f in files]  # fmt: skip
            return self._json(200, {"files": modes})
        if parts[-4:] == ["info", "lfs", "objects", "batch"]:
            return self._batch(json.loads(body))
        if parts[:2] == ["api", "models"] and parts[4:5] == ["commit"]:
            return self._commit(f"{parts[2]}/{parts[3]}", body)
        return self._json(404, {"error": "not found"})

    def _batch(self, doc: dict[str, Any]) -> None:
        assert doc["operation"] == "upload" and "basic" in doc["transfers"]
        self.state.batches.append([o["oid"] for o in doc["objects"]])
        out = []
        for o in doc["objects"]:
            if o["oid"] in self.state.objects:
                out.append({"oid": o["oid"], "size": o["size"]})  # present: no actions
                continue
            href = f"{self.state.storage}/upload/{o['oid']}?X-Amz-Signature=secret"
            verify = f"http://{self.headers['Host']}/verify/{o['oid']}"
            out.append({"oid": o["oid"], "size": o["size"], "actions": {
                "upload": {"href": href, "header": {"x-storage": "1"}},
                "verify": {"href": verify}}})  # fmt: skip
        self._json(200, {"transfer": "basic", "objects": out})

    def _commit(self, repo: str, body: bytes) -> None:
        lines = [json.loads(line) for line in body.splitlines() if line.strip()]
        self.state.commits.append(lines)
        files = self.state.repos.setdefault(repo, {})
        for line in lines[1:]:
            value = line["value"]
            if line["key"] == "lfsFile":
                if value["oid"] not in self.state.objects:
                    return self._json(400, {"error": f"unknown LFS object {value['oid']}"})
                files[value["path"]] = self.state.objects[value["oid"]]
            elif line["key"] == "file":
                files[value["path"]] = base64.b64decode(value["content"])
        oid = hashlib.sha1(body).hexdigest()
        self._json(200, {"commitOid": oid, "commitUrl": f"https://hub/{repo}/commit/{oid}"})


class _Verify(_Api):
    def do_POST(self) -> None:
        if not self.path.startswith("/verify/"):
            return super().do_POST()
        body = json.loads(self._body())
        self.state.requests.append(("POST", self.path, self.headers.get("Authorization")))
        ok = self.state.objects.get(body["oid"]) is not None
        return self._json(200 if ok else 404, {"ok": ok})


class _Storage(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    state: HubState

    def log_message(self, *args: Any) -> None:
        pass

    def do_PUT(self) -> None:
        oid = self.path.split("?")[0].rsplit("/", 1)[-1]
        self.state.requests.append(("PUT", self.path, self.headers.get("Authorization")))
        self.state.puts[oid] += 1
        length = int(self.headers.get("Content-Length") or 0)
        if self.state.drop_puts[oid] > 0:
            self.state.drop_puts[oid] -= 1
            self.rfile.read(length // 2)
            self.close_connection = True
            self.connection.close()  # the upload drops half way
            return
        data = self.rfile.read(length)
        if hashlib.sha256(data).hexdigest() == oid:
            self.state.objects[oid] = data
        self.send_response(200 if oid in self.state.objects else 400)
        self.send_header("Content-Length", "0")
        self.end_headers()


@contextmanager
def hub_fake() -> Iterator[tuple[str, HubState]]:
    """Yields (API base URL, state)."""
    state = HubState()
    servers = []
    for handler in (_Verify, _Storage):
        bound = type(handler.__name__, (handler,), {"state": state})
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), bound)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
    state.storage = f"http://127.0.0.1:{servers[1].server_address[1]}"
    try:
        yield f"http://127.0.0.1:{servers[0].server_address[1]}", state
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()
