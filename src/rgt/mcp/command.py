"""`rgt mcp`: serve rgt's verbs to a coding agent over MCP (stdio)."""

from __future__ import annotations

import click

INSTALL_HINT = "pip install 'remote-gpu-trainer[mcp]'  (the MCP SDK needs Python >= 3.10)"


@click.command()
def mcp() -> None:
    """Serve the verbs as MCP tools over stdin/stdout (for Claude Code, Codex, Cursor, Gemini).

    Add it to a host:  claude mcp add rgt -- rgt mcp
    There is no approve tool: `down` answers approval_required, and a human runs `rgt approve`.
    """
    try:
        from rgt.mcp.server import serve
    except ImportError as exc:
        if exc.name is None or not exc.name.startswith("mcp"):
            raise
        from rgt.errors import UsageError

        raise UsageError(
            f"`rgt mcp` needs the MCP SDK ({exc.name} is missing)", fix=INSTALL_HINT
        ) from None
    serve()


def register(cli: click.Group) -> None:
    cli.add_command(mcp)
