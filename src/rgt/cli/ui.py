"""`rgt ui`: serve the dashboard on 127.0.0.1; the first stdout line is the URL with the token."""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path
from typing import Any

import click

from rgt.cli._output import Output, output_options

INSTALL_HINT = "pip install starlette uvicorn  (both are core dependencies of rgt)"


@click.command()
@click.option("--port", type=int, default=0, show_default=True, help="Port (0: a free one).")
@click.option("--open", "open_browser", is_flag=True, help="Open the page in a browser.")
@click.option("--no-token", is_flag=True, help="No token (anyone on this host can read it).")
@click.option("--interval", type=float, default=5.0, show_default=True, help="Patrol every S s.")
@click.option(
    "--results",
    "results",
    multiple=True,
    type=click.Path(path_type=Path, file_okay=False),
    help="A delivery workspace to show on the results page (repeatable).",
)
@output_options
def ui(
    port: int,
    open_browser: bool,
    no_token: bool,
    interval: float,
    results: tuple[Path, ...],
    out: Output,
) -> None:
    """A local dashboard: machines, money, jobs, curves, the gate and results (read-only but
    for a confirmed cancel). Stops on Ctrl-C."""
    from rgt.config import rgt_home

    serve, token = _server(interval), None if no_token else _token()
    sock = bind(port)
    url = _announce(sock.getsockname()[1], token, out.json_mode)
    if open_browser:
        import webbrowser

        webbrowser.open(url)
    serve(sock, rgt_home(), token, interval, results)


def _server(interval: float) -> Any:
    """The dashboard's server, once the options are known good and its packages are here."""
    from rgt.errors import UsageError

    if interval <= 0:
        raise UsageError("--interval must be > 0", fix="e.g. --interval 5")
    try:
        from rgt.ui.server import serve
    except ImportError as exc:
        raise UsageError(f"`rgt ui` needs {exc.name}", fix=INSTALL_HINT) from None
    return serve


def _token() -> str:
    from rgt.ui.auth import new_token

    return new_token()


def _announce(port: int, token: str | None, json_mode: bool) -> str:
    """The first stdout line: the URL (with its token), or that as one JSON object."""
    url = f"http://127.0.0.1:{port}/" + (f"?token={token}" if token else "")
    first = json.dumps({"url": url, "port": port, "token": token}) if json_mode else url
    sys.stdout.write(first + "\n")
    sys.stdout.flush()
    return url


def bind(port: int) -> socket.socket:
    from rgt.errors import UsageError

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(("127.0.0.1", port))
    except OSError as exc:
        sock.close()
        raise UsageError(
            f"cannot listen on 127.0.0.1:{port}: {exc.strerror}",
            fix="pick another --port, or --port 0 for a free one",
        ) from None
    sock.listen(128)
    return sock


def register(cli: click.Group) -> None:
    cli.add_command(ui)
