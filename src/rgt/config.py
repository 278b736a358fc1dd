"""Configuration, read in one place.

Precedence, for every setting: command-line flag > environment variable > project ``rgt.toml``
(nearest one from the current directory up) > user config (``$RGT_HOME/config.toml``) > the
profile's default > rgt's built-in default.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rgt.errors import SpecError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

# The one TOML parser of rgt (tomllib from 3.11, tomli before): other modules use these two.
TOMLDecodeError = tomllib.TOMLDecodeError


def loads_toml(text: str) -> dict[str, Any]:
    data: dict[str, Any] = tomllib.loads(text)
    return data


ENV_PREFIX = "RGT_"


def rgt_home() -> Path:
    """``$RGT_HOME`` or ``~/.rgt``; created on first use."""
    home = Path(os.environ.get("RGT_HOME") or Path.home() / ".rgt")
    home.mkdir(parents=True, exist_ok=True)
    return home


def _load_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as handle:
            data: dict[str, Any] = tomllib.load(handle)
            return data
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"{path}: {exc}", path=str(path), fix="fix the TOML syntax") from exc


def project_config_path(start: Path | None = None) -> Path | None:
    here = (start or Path.cwd()).resolve()
    for directory in (here, *here.parents):
        candidate = directory / "rgt.toml"
        if candidate.is_file():
            return candidate
    return None


@dataclass(frozen=True)
class Settings:
    """The resolved layers; ``get`` applies the precedence rule above."""

    project: dict[str, Any]
    user: dict[str, Any]

    @classmethod
    def load(cls, start: Path | None = None) -> Settings:
        project_path = project_config_path(start)
        user_path = rgt_home() / "config.toml"
        return cls(
            project=_load_toml(project_path) if project_path else {},
            user=_load_toml(user_path) if user_path.is_file() else {},
        )

    def get(
        self, key: str, *, flag: Any = None, profile_default: Any = None, default: Any = None
    ) -> Any:
        """Resolve dotted ``key`` (e.g. ``"run.probe_seconds"``)."""
        if flag is not None:
            return flag
        env_name = ENV_PREFIX + key.replace(".", "_").upper()
        if env_name in os.environ:
            return os.environ[env_name]
        for layer in (self.project, self.user):
            value = _dig(layer, key)
            if value is not None:
                return value
        return profile_default if profile_default is not None else default


def _dig(data: dict[str, Any], dotted: str) -> Any:
    node: Any = data
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node
