"""`rgt skill show` and `rgt skill install --for HOST`: the SKILL.md shipped with rgt."""

from __future__ import annotations

import sys
from dataclasses import asdict

import click

from rgt.cli._output import Output, output_options


@click.group()
def skill() -> None:
    """The instructions a coding agent reads to drive rgt (RUN → VERIFY → DELIVER)."""


@skill.command()
def show() -> None:
    """Print SKILL.md (pipe it anywhere an agent reads instructions)."""
    from rgt.mcp.skill import skill_text

    sys.stdout.write(skill_text())


@skill.command()
@click.option(
    "--for",
    "host",
    required=True,
    type=click.Choice(["claude", "codex", "cursor", "gemini"]),
    help="The coding agent that will read it.",
)
@click.option("--project", is_flag=True, help="Into this project (the current directory).")
@output_options
def install(host: str, project: bool, out: Output) -> None:
    """Write SKILL.md where HOST reads skills or agent instructions (user-wide by default).

    Claude Code: ~/.claude/skills/rgt/SKILL.md; Codex: ~/.codex/AGENTS.md; Gemini CLI:
    ~/.gemini/GEMINI.md; Cursor (--project only): .cursor/rules/rgt.mdc. In AGENTS.md and
    GEMINI.md only rgt's marked block is written; the rest of the file is kept."""
    from rgt.mcp.skill import install as do_install

    done = do_install(host, project)
    data = {**asdict(done), "path": str(done.path)}
    out.result(data, lambda o: o.out.print(f"{host}: wrote {done.path}", markup=False))


def register(cli: click.Group) -> None:
    cli.add_command(skill)
