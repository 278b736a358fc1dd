"""Shared by the network tests: the CLI in a subprocess and a user profile with extra lines."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rgt.profiles.loader import user_profile_dir
from tests import clirun

BUNDLED = Path(__file__).parents[2] / "src" / "rgt" / "profiles" / "generic-ssh.toml"


def rgt(*args: str, cwd: Path | None = None, stdin: str = "") -> Any:
    env = {"RGT_NVIDIA_SMI": "/nonexistent/nvidia-smi"}
    return clirun.rgt(*args, cwd=cwd, env=env, stdin=stdin)


def profile_with(
    python: str | None = None,
    hf_home: Path | None = None,
    network: dict[str, str] | None = None,
    env: dict[str, str] | None = None,
) -> None:
    """The user's generic-ssh profile: the image's environment is ``python``, jobs get
    HF_HOME=``hf_home`` and ``env`` from [network.env], ``network`` adds keys to [network]."""
    text = BUNDLED.read_text()
    if python:
        text = text.replace("[environment]\n", f'[environment]\npython = "{python}"\n')
    lines = "".join(f'{k} = "{v}"\n' for k, v in (network or {}).items())
    text = text.replace("[network]\n", f"[network]\n{lines}")
    table = {**({"HF_HOME": str(hf_home)} if hf_home else {}), **(env or {})}
    if table:
        text += "\n[network.env]\n" + "".join(f'{k} = "{v}"\n' for k, v in table.items())
    user_profile_dir().mkdir(parents=True, exist_ok=True)
    (user_profile_dir() / "generic-ssh.toml").write_text(text)
