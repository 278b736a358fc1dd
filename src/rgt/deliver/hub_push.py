"""The steps of one resumable upload (``rgt.deliver.hub`` holds the protocol and the ledger):
create the repo, ask each file's upload mode, send the LFS objects the Hub does not have yet,
then commit every file in one commit. Each acknowledgement is written to the ledger before the
next request, so a drop at any point resumes where the Hub left off."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rgt.deliver.hub import (
    CHUNK,
    SAMPLE,
    HubClient,
    HubTarget,
    Ledger,
    UploadFile,
    origin,
    request_bytes,
    with_retries,
)
from rgt.errors import TransportError, VerifyError

LFS = {"Accept": "application/vnd.git-lfs+json", "Content-Type": "application/vnd.git-lfs+json"}
BATCH = 100  # objects per LFS batch request


@dataclass
class UploadReport:
    repo: str
    revision: str
    files: int = 0
    lfs_sent: list[str] = field(default_factory=list)  # paths whose bytes went out this run
    lfs_skipped: list[str] = field(default_factory=list)  # acknowledged before, or on the Hub
    commit: str | None = None
    already_committed: bool = False

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def upload(
    target: HubTarget,
    token: str,
    root: Path,
    files: Sequence[UploadFile],
    message: str,
    key: str | None = None,
) -> UploadReport:
    """``key`` names what is uploaded (a job id) for the ledger; default: the local root."""
    client = HubClient(target, token)
    ledger = Ledger(f"{target.endpoint}|{target.repo}|{target.revision}|{key or root}")
    report = UploadReport(target.repo, target.revision, files=len(files))
    if files and all(ledger.entry(f).get("commit") for f in files):
        report.already_committed, report.commit = True, ledger.entry(files[0])["commit"]
        return report
    _create(client)
    _modes(client, ledger, root, files)
    lfs = [f for f in files if ledger.entry(f)["mode"] == "lfs"]
    for start in range(0, len(lfs), BATCH):
        _send_lfs(client, ledger, root, lfs[start : start + BATCH], report)
    report.commit = _commit(client, ledger, root, files, message)
    return report


def _create(client: HubClient) -> None:
    org, name = client.target.repo.split("/")
    body = {"name": name, "organization": org, "type": client.target.repo_type}
    try:
        client.call("POST", f"{client.target.endpoint}/api/repos/create", body)
    except TransportError as exc:
        if " 409 " not in exc.message:  # 409: the repo exists, which is what we want
            raise


def _modes(client: HubClient, ledger: Ledger, root: Path, files: Sequence[UploadFile]) -> None:
    todo = [f for f in files if "mode" not in ledger.entry(f)]
    for start in range(0, len(todo), BATCH):
        part = todo[start : start + BATCH]
        asked = [{"path": f.path, "size": f.size, "sample": _sample(root / f.path)} for f in part]
        url = f"{client.target.api}/preupload/{client.target.rev}"
        answer = client.call("POST", url, {"files": asked})
        modes = {a.get("path"): a.get("uploadMode") for a in answer.get("files") or []}
        for f in part:
            if modes.get(f.path) not in ("lfs", "regular"):
                raise TransportError(f"the Hub gave no upload mode for {f.path}", fix="retry")
            ledger.note(f, mode=modes[f.path])


def _sample(path: Path) -> str:
    with path.open("rb") as handle:
        return base64.b64encode(handle.read(SAMPLE)).decode("ascii")


def _send_lfs(
    client: HubClient, ledger: Ledger, root: Path, part: Sequence[UploadFile], report: UploadReport
) -> None:
    todo = [f for f in part if not ledger.entry(f).get("lfs_acked")]
    report.lfs_skipped += [f.path for f in part if f not in todo]
    if not todo:
        return
    objects = [{"oid": f.sha256, "size": f.size} for f in todo]
    body = {"operation": "upload", "transfers": ["basic"], "objects": objects,
            "hash_algo": "sha256", "ref": {"name": client.target.revision}}  # fmt: skip
    url = f"{client.target.endpoint}/{client.target.repo}.git/info/lfs/objects/batch"
    answer = client.call("POST", url, body, LFS)
    actions = {o.get("oid"): o.get("actions") for o in answer.get("objects") or []}
    for f in todo:
        act = actions.get(f.sha256) or {}
        if act.get("upload"):
            _put(client, root / f.path, f, act["upload"])
            report.lfs_sent.append(f.path)
        else:
            report.lfs_skipped.append(f.path)  # the Hub has these bytes already
        if act.get("verify"):
            client.call("POST", act["verify"]["href"], {"oid": f.sha256, "size": f.size},
                        act["verify"].get("header") or {})  # fmt: skip
        ledger.note(f, lfs_acked=True)


def _put(client: HubClient, path: Path, f: UploadFile, action: dict[str, Any]) -> None:
    """PUT the file's bytes, once they hashed to what was verified (streamed from the file)."""
    _check_verified(path, f)
    headers = {str(k): str(v) for k, v in (action.get("header") or {}).items()}
    headers.setdefault("Content-Type", "application/octet-stream")
    headers["Content-Length"] = str(f.size)
    if origin(action["href"]) == client.origin:
        headers["Authorization"] = f"Bearer {client.token}"

    def send() -> bytes:
        with path.open("rb") as handle:
            return request_bytes("PUT", action["href"], handle, headers)

    with_retries(send, f"PUT {f.path}")


def _check_verified(path: Path, f: UploadFile) -> None:
    digest, size = hashlib.sha256(), 0
    with path.open("rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
            size += len(chunk)
    if digest.hexdigest() != f.sha256 or size != f.size:
        raise VerifyError(
            f"{f.path} changed since it was verified (sha256 {digest.hexdigest()[:12]}…, "
            f"verified {f.sha256[:12]}…): not uploaded",
            fix="pull the job again (`rgt pull JOB`) so what is uploaded is what was verified",
        )


def _commit(
    client: HubClient, ledger: Ledger, root: Path, files: Sequence[UploadFile], message: str
) -> str:
    lines: list[dict[str, Any]] = [{"key": "header", "value": {"summary": message,
                                                              "description": ""}}]  # fmt: skip
    for f in files:
        if ledger.entry(f)["mode"] == "lfs":
            value = {"path": f.path, "algo": "sha256", "oid": f.sha256, "size": f.size}
            lines.append({"key": "lfsFile", "value": value})
        else:
            _check_verified(root / f.path, f)
            content = base64.b64encode((root / f.path).read_bytes()).decode()
            lines.append({"key": "file", "value": {"path": f.path, "encoding": "base64",
                                                   "content": content}})  # fmt: skip
    body = b"".join(json.dumps(line).encode() + b"\n" for line in lines)
    url = f"{client.target.api}/commit/{client.target.rev}"
    answer = client.call("POST", url, body, {"Content-Type": "application/x-ndjson"})
    oid = str(answer.get("commitOid") or answer.get("commitUrl") or "?")
    for f in files:
        ledger.note(f, commit=oid)
    return oid
