"""`rgt mcp`: serve rgt's verbs to a coding agent over MCP (stdio)."""

from __future__ import annotations

import click


@click.command()
def mcp() -> None:
    """Serve the verbs as MCP tools over stdin/stdout (for Claude Code, Codex, Cursor, Gemini).

    Add it to a host:  claude mcp add rgt -- rgt mcp
    There is no approve tool: `down` answers approval_required, and a human runs `rgt approve`.
    """
    from rgt.mcp.server import serve

    serve()


def register(cli: click.Group) -> None:
    cli.add_command(mcp)
