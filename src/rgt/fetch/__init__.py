"""`rgt fetch NAME hf://ORG/MODEL[@REV] | https://…`: a download that runs ON the machine.

A fetch is a job: its snapshot holds only ``downloader.py``, ``fetch_aids.py``,
``fetch_body.py`` and ``rgt/_confine.py`` (stdlib, Python 3.8, shipped in rgt) and its
command runs it with the machine's interpreter, so it is detached, survives ssh drops, gets the
network plan's ``HF_ENDPOINT``/``no_proxy`` like every job, shows in `rgt watch`, and its token
travels as a secret over stdin. The downloader retries with backoff itself; the job does not
restart (``--retries 0``): a re-run resumes the partial files.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from rgt.errors import UsageError
from rgt.models import JobRecord, RetryPolicy
from rgt.state.store import Store

HF_SOURCE = re.compile(r"\Ahf://([A-Za-z0-9][\w.-]*)/([A-Za-z0-9][\w.-]*)(@[\w./-]+)?\Z")
DOWNLOADER = Path(__file__).with_name("downloader.py")
AIDS = Path(__file__).with_name("fetch_aids.py")  # imported by the downloader, shipped with it
BODY = Path(__file__).with_name("fetch_body.py")  # the caps and checks of a file's bytes
CONFINE = Path(__file__).parents[1] / "_confine.py"  # the check of every name from the hub
VERIFIER = Path(__file__).with_name("cache_verify.py")  # `--verify`: a cache already there
SHA256 = re.compile(r"\A[0-9a-fA-F]{64}\Z")


@dataclass(frozen=True)
class FetchRequest:
    source: str
    includes: tuple[str, ...] = ()
    to: str | None = None
    token_env: str | None = None  # the name of the secret that holds the hub token
    sha256: str | None = None  # a URL's expected sha256 (a hub publishes its own)
    max_bytes: int | None = None  # refuse a larger file, cut a body here


def default_to(source: str, durable_root: str) -> str:
    """``<durable>/models/ORG/MODEL`` for a hub repo, ``<durable>/downloads`` for a URL."""
    found = HF_SOURCE.match(source)
    if found:
        return f"{durable_root}/models/{found.group(1)}/{found.group(2)}"
    if source.startswith(("https://", "http://")) and not any(c.isspace() for c in source):
        return f"{durable_root}/downloads"
    raise UsageError(
        f"{source!r} is not a source rgt can fetch",
        fix="give hf://ORG/MODEL[@REV] or an https:// URL",
    )


def start_fetch(store: Store, name: str, req: FetchRequest) -> tuple[JobRecord, str]:
    """Launch the fetch job on ``name``; returns it and the directory it fills."""
    from rgt.backends import backend_for
    from rgt.jobs.launch import LaunchOptions, launch

    _check(req)
    backend = backend_for(store, name)
    to = req.to or default_to(req.source, backend.machine.durable_root)
    command = [backend.python, DOWNLOADER.name, req.source, "--to", to, *_options(req)]
    with tempfile.TemporaryDirectory(prefix="rgt-fetch-") as snapshot:
        for part in (DOWNLOADER, AIDS, BODY, CONFINE):
            shutil.copy(part, Path(snapshot) / part.name)
        options = LaunchOptions(
            command=tuple(command),
            cwd=Path(snapshot),
            secret_env=(req.token_env,) if req.token_env else (),
            retry=RetryPolicy(max_retries=0),
        )
        return launch(store, name, options), to


def start_verify(store: Store, name: str, source: str, cache: str | None) -> JobRecord:
    """A job on ``name`` that checks the HF cache there against its blobs' hashes
    (``cache_verify``); its log ends with the report, also its artifact cache-verify.json."""
    from rgt.backends import backend_for
    from rgt.jobs.launch import LaunchOptions, launch

    if not HF_SOURCE.match(source):
        raise UsageError(f"--verify checks a hub repo's cache, not {source!r}",
                         fix="give hf://ORG/MODEL[@REV]")  # fmt: skip
    backend = backend_for(store, name)
    command = [backend.python, VERIFIER.name, source, *(["--cache", cache] if cache else [])]
    with tempfile.TemporaryDirectory(prefix="rgt-verify-") as snapshot:
        shutil.copy(VERIFIER, Path(snapshot) / VERIFIER.name)
        options = LaunchOptions(command=tuple(command), cwd=Path(snapshot),
                                retry=RetryPolicy(max_retries=0))  # fmt: skip
        return launch(store, name, options)


def _check(req: FetchRequest) -> None:
    default_to(req.source, "")  # validates the source even when --to is given
    if req.sha256 is not None and not SHA256.match(req.sha256):
        raise UsageError(f"--sha256 {req.sha256[:80]!r} is not 64 hex digits", fix="give the "
                         "file's sha256 as printed by `sha256sum`")  # fmt: skip
    if req.sha256 is not None and req.source.startswith("hf://"):
        raise UsageError("--sha256 is for a URL", fix="drop it: a hub repo publishes each "
                         "file's sha256 and rgt checks it")  # fmt: skip
    if req.max_bytes is not None and req.max_bytes <= 0:
        raise UsageError("--max-bytes must be a positive number of bytes", fix="e.g. 20000000000")


def _options(req: FetchRequest) -> list[str]:
    """The downloader's flags; the token travels as a secret, only its variable's name here."""
    options = [a for p in req.includes for a in ("--include", p)]
    if req.token_env:
        options += ["--token-env", req.token_env]
    if req.sha256:
        options += ["--sha256", req.sha256.lower()]
    if req.max_bytes:
        options += ["--max-bytes", str(req.max_bytes)]
    return options
