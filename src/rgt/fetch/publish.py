"""`rgt pull JOB --to hf://ORG/REPO[@REV] --hf-token SOURCE`: the job's verified artifacts to a
Hugging Face Hub repo (``rgt.deliver.hub``: resumable, nothing acknowledged is sent twice).

What goes up is what `rgt pull` verified: the job's last verified pull when its files are
unchanged since, else a fresh pull into ``$RGT_HOME/hub-staging/JOB`` (verified the same way);
each file is hashed again before it is sent and must match. The token is a secret and never an
argument: ``-`` (one line on stdin), ``credentials:NAME`` (``[hf] NAME`` in
``$RGT_HOME/credentials.toml``, mode 0600) or ``env:NAME``.
"""

from __future__ import annotations

import os
import re
import stat
import sys
from pathlib import Path
from typing import IO, Any

from rgt._log import register_secrets
from rgt.config import rgt_home
from rgt.deliver.hub import HubTarget, UploadFile
from rgt.deliver.hub_push import upload
from rgt.errors import UsageError, VerifyError
from rgt.state.store import Store

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
SOURCES = "--hf-token - (stdin), credentials:NAME or env:NAME"


def publish(store: Store, job_id: str, to: str, token_source: str | None,
            stdin: IO[str] | None = None) -> dict[str, Any]:  # fmt: skip
    target = HubTarget.parse(to, os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    token = read_token(token_source, stdin)
    root, files = verified_copy(store, job_id)
    message = f"rgt: the verified artifacts of job {job_id}"
    report = upload(target, token, root, files, message, key=f"job:{job_id}")
    return {"job_id": job_id, "to": to, "from": str(root), **report.to_json(), "ok": True}


def read_token(source: str | None, stdin: IO[str] | None = None) -> str:
    if not source:
        raise UsageError("a Hub upload needs a write token", fix=f"give {SOURCES}")
    if source.startswith("hf_") or len(source) > 40:
        raise UsageError("a token on the command line shows in `ps` and shell history",
                         fix=f"give {SOURCES}")  # fmt: skip
    kind, _, name = source.partition(":")
    if source == "-":
        token = (stdin or sys.stdin).readline().strip()
    elif kind == "env" and _NAME.fullmatch(name):
        token = os.environ.get(name, "").strip()
    elif kind == "credentials" and _NAME.fullmatch(name):
        token = _credential(name)
    else:
        raise UsageError(f"unknown --hf-token source {source!r}", fix=f"give {SOURCES}")
    if not token or any(c.isspace() for c in token):
        raise UsageError(f"no token in {source}", fix=f"give {SOURCES}")
    register_secrets([token])  # never in a debug log line
    return token


def _credential(name: str) -> str:
    from rgt.config import loads_toml

    path = rgt_home() / "credentials.toml"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as exc:
        fix = f'add `[hf]` and `{name} = "hf_…"` to it, then chmod 600 it'
        raise UsageError(f"cannot read {path} ({exc.strerror})", fix=fix) from exc
    with os.fdopen(fd, "rb") as handle:
        if stat.S_IMODE(os.fstat(handle.fileno()).st_mode) & 0o077:
            raise UsageError(f"{path} is readable by others", fix=f"chmod 600 {path}")
        data = loads_toml(handle.read().decode("utf-8"))
    value = (data.get("hf") or {}).get(name)
    if not isinstance(value, str):
        raise UsageError(f"{path} has no [hf] {name}", fix=f'add `{name} = "hf_…"` under [hf]')
    return value


def verified_copy(store: Store, job_id: str) -> tuple[Path, list[UploadFile]]:
    """The local copy `rgt pull` verified, unchanged since; else a fresh verified pull."""
    from rgt.jobs.pull import pull
    from rgt.jobs.pulled import recheck

    last = store.last_pull(job_id)
    if not (last and last["verified"] and not recheck(last["dest"], last["files"])):
        result = pull(store, job_id, rgt_home() / "hub-staging" / job_id)
        last = store.last_pull(job_id)
        if not result.ok or not last or not last["verified"]:
            raise VerifyError(f"the artifacts of {job_id} did not verify: nothing uploaded",
                              fix=f"see `rgt pull {job_id}` for what failed")  # fmt: skip
    root = Path(last["dest"])
    files = [_file(root, path, rec) for path, rec in sorted(last["files"].items())]
    return root, files


def _file(root: Path, path: str, rec: Any) -> UploadFile:
    sha = rec["sha256"] if isinstance(rec, dict) else str(rec)  # older records: the sha only
    size = rec.get("bytes") if isinstance(rec, dict) else None
    return UploadFile(path, sha, int(size if size is not None else (root / path).stat().st_size))
