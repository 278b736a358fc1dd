"""`rgt mcp`: serve rgt's verbs to a coding agent over MCP (stdio)."""

from __future__ import annotations

import click

# rgt.mcp.bounded.DEFAULT_MAX_BYTES and MIN_MAX_BYTES (not imported: `rgt --help` stays cheap)
DEFAULT_MAX_RESULT = 64 * 1024
MIN_MAX_RESULT = 4096


@click.command()
@click.option(
    "--max-result-bytes",
    type=click.IntRange(min=MIN_MAX_RESULT),
    default=DEFAULT_MAX_RESULT,
    show_default=True,
    envvar="RGT_MCP_MAX_RESULT",
    show_envvar=True,
    help="Largest tool result on the wire; a longer one is cut, marked, with the command "
    "that prints it whole.",
)
def mcp(max_result_bytes: int) -> None:
    """Serve the verbs as MCP tools over stdin/stdout (for Claude Code, Codex, Cursor, Gemini).

    Add it to a host:  claude mcp add rgt -- rgt mcp
    There is no approve tool: `down` answers approval_required, and a human runs `rgt approve`.
    """
    from rgt.mcp.server import serve

    serve(max_result_bytes)


def register(cli: click.Group) -> None:
    cli.add_command(mcp)
