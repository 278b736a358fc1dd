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
    """Write ``[vendor] api_key`` into credentials.toml, created 0600 (other vendors kept)."""
    path = credentials_path()
    lines = []
    if path.exists():
        lines = [ln for ln in path.read_text().splitlines() if ln.strip()]
    lines = [*_without_table(lines, vendor), f"[{vendor}]", f"api_key = {_quote(key)}"]
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write("\n".join(lines) + "\n")
    os.chmod(path, 0o600)
    return path


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
