"""The shipped SKILL.md and where each coding agent reads it.

Where each host looks (from its own documentation):

- Claude Code: a skill folder, ``~/.claude/skills/rgt/SKILL.md`` (user) or
  ``.claude/skills/rgt/SKILL.md`` (project); the file is ours, written whole.
- Codex: ``AGENTS.md`` in ``$CODEX_HOME`` (default ``~/.codex``) or at the project root.
- Gemini CLI: ``~/.gemini/GEMINI.md`` or ``GEMINI.md`` at the project root.
- Cursor: project rules only, ``.cursor/rules/rgt.mdc`` (user rules live in its settings UI).

``AGENTS.md`` and ``GEMINI.md`` are the user's own files: rgt writes its text between two marker
lines and replaces only that block on the next install, never the rest of the file.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from rgt._fs import atomic_write_bytes
from rgt.errors import UsageError

HOSTS = ("claude", "codex", "cursor", "gemini")
BEGIN = "<!-- rgt skill: begin (managed by `rgt skill install`; edits here are replaced) -->"
END = "<!-- rgt skill: end -->"
_FRONT = re.compile(r"\A---\n(.*?)\n---\n", re.DOTALL)


@dataclass(frozen=True)
class Installed:
    host: str
    path: Path
    scope: str  # "user" or "project"
    mode: str  # "file": the whole file is rgt's; "block": a marked block in the user's file


def skill_text() -> str:
    return resources.files("rgt.mcp").joinpath("SKILL.md").read_text(encoding="utf-8")


def body() -> str:
    """SKILL.md without its front matter (for hosts that read plain Markdown)."""
    return _FRONT.sub("", skill_text(), count=1).lstrip("\n")


def description() -> str:
    match = _FRONT.match(skill_text())
    front = match.group(1) if match else ""
    found = re.search(r"^description: (.*)$", front, re.MULTILINE)
    return found.group(1) if found else "rgt: run, verify and deliver on rented GPUs"


def destination(host: str, project: bool, home: Path, cwd: Path) -> tuple[Path, str]:
    """The file ``host`` reads, and how rgt writes it ("file" or "block")."""
    if host == "claude":
        base = cwd if project else home
        return base / ".claude" / "skills" / "rgt" / "SKILL.md", "file"
    if host == "cursor":
        if not project:
            raise UsageError(
                "Cursor reads rule files only from a project (its user rules live in Settings)",
                fix="run `rgt skill install --for cursor --project` in the project's root",
            )
        return cwd / ".cursor" / "rules" / "rgt.mdc", "file"
    if host == "codex":
        codex_home = Path(os.environ.get("CODEX_HOME") or home / ".codex")
        return (cwd if project else codex_home) / "AGENTS.md", "block"
    if host == "gemini":
        return (cwd if project else home / ".gemini") / "GEMINI.md", "block"
    raise UsageError(f"unknown host {host!r}", fix=f"use one of: {', '.join(HOSTS)}")


def install(
    host: str, project: bool, home: Path | None = None, cwd: Path | None = None
) -> Installed:
    path, mode = destination(host, project, home or Path.home(), cwd or Path.cwd())
    path.parent.mkdir(parents=True, exist_ok=True)
    if mode == "file":
        _write(path, _cursor_rule() if host == "cursor" else skill_text())
    else:
        old = path.read_text(encoding="utf-8") if path.exists() else ""
        _write(path, with_block(old, body()))
    return Installed(host, path, "project" if project else "user", mode)


def with_block(text: str, block: str) -> str:
    """``text`` with rgt's marked block replaced, or appended when it has none."""
    managed = f"{BEGIN}\n{block.rstrip()}\n{END}\n"
    start, end = text.find(BEGIN), text.find(END)
    if start != -1 and end > start:
        return text[:start] + managed + text[end + len(END) :].lstrip("\n")
    separator = "" if not text else ("\n" if text.endswith("\n") else "\n\n")
    return text + separator + managed


def _cursor_rule() -> str:
    front = f"---\ndescription: {description()}\nalwaysApply: false\n---\n"
    return front + body()


def _write(path: Path, text: str) -> None:
    atomic_write_bytes(str(path), text.encode("utf-8"))
