"""API keys: ``<VENDOR>_API_KEY`` in the environment, else ``$RGT_HOME/credentials.toml``.

The file is refused when group or world can read it (like ssh refuses a loose private key).
A key is only ever held in memory: it is never passed in argv, logged, written to events or
the state store, and ``redact`` scrubs it from any text that might be shown.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from rgt.config import TOMLDecodeError, loads_toml, rgt_home
from rgt.errors import MissingKeyError, SpecError, UsageError

KEY_VARIABLES = {
    "runpod": "RUNPOD_API_KEY",
    "vastai": "VAST_API_KEY",
    "lambda": "LAMBDA_API_KEY",
    "paperspace": "PAPERSPACE_API_KEY",
}


def credentials_path() -> Path:
    return rgt_home() / "credentials.toml"


def api_key(vendor: str) -> str:
    variable = KEY_VARIABLES[vendor]
    from_env = os.environ.get(variable, "").strip()
    if from_env:
        return from_env
    path = credentials_path()
    key = _from_file(path, vendor)
    if not key:
        raise MissingKeyError(vendor, variable, str(path))
    return key


def _from_file(path: Path, vendor: str) -> str | None:
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise UsageError(
            f"{path} is readable by group or others (mode {stat.S_IMODE(mode):o}): refused",
            fix=f"chmod 600 {path}",
        )
    try:
        table = loads_toml(path.read_text()).get(vendor) or {}
    except TOMLDecodeError as exc:  # the parser's message quotes no values
        raise SpecError(f"{path}: {exc}", path=str(path), fix="fix the TOML syntax") from exc
    key = table.get("api_key") if isinstance(table, dict) else None
    return str(key).strip() if key else None


def save_key(vendor: str, key: str) -> Path:
    """Write ``[vendor] api_key`` into credentials.toml (other tables kept): a new file of mode
    0600 renamed over the old one, so the key is never in a file anyone else can read, even for
    a moment. An existing file that group or others can read is refused, not silently fixed:
    what it held may already have been read."""
    key = key.strip()
    if not key or any(c.isspace() or ord(c) < 32 for c in key):
        raise UsageError("the key is empty or has spaces in it", fix="paste the key alone")
    path = credentials_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [ln for ln in _read_private(path).splitlines() if ln.strip()]
    lines = [*_without_table(lines, vendor), f"[{vendor}]", f"api_key = {_quote(key)}"]
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "w") as handle:
            os.fchmod(handle.fileno(), 0o600)  # whatever the umask
            handle.write("\n".join(lines) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def _read_private(path: Path) -> str:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return ""
    except OSError as exc:
        raise UsageError(f"cannot read {path} ({exc.strerror})", fix=f"check {path}") from exc
    with os.fdopen(fd) as handle:
        mode = stat.S_IMODE(os.fstat(handle.fileno()).st_mode)
        if mode & 0o077:
            raise UsageError(
                f"{path} is readable by group or others (mode {mode:o}): refused",
                fix=f"chmod 600 {path}, and replace any key it held (it may have been read)",
            )
        return handle.read()


def configured(vendor: str) -> bool:
    """A key for ``vendor`` is set (environment, or a table in credentials.toml): no network,
    no error for a loose or broken file (``api_key`` reports those when the key is used)."""
    if os.environ.get(KEY_VARIABLES[vendor], "").strip():
        return True
    try:
        text = credentials_path().read_text()
    except OSError:
        return False
    return f"[{vendor}]" in {line.strip() for line in text.splitlines()}


def _without_table(lines: list[str], vendor: str) -> list[str]:
    kept, skipping = [], False
    for line in lines:
        if line.strip().startswith("["):
            skipping = line.strip() == f"[{vendor}]"
        if not skipping:
            kept.append(line)
    return kept


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def redact(text: str, *secrets: str) -> str:
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, "[redacted]")
    return text
