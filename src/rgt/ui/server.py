"""Run the app under uvicorn on an already bound socket (so the printed port is the real one)."""

from __future__ import annotations

import socket
from pathlib import Path

import uvicorn

from rgt.ui.app import create_app

GRACE_S = 2


def serve(
    sock: socket.socket, home: Path, token: str | None, interval: float, results: tuple[Path, ...]
) -> None:
    app = create_app(home, token, interval, results)
    config = uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=GRACE_S,  # SSE streams never end by themselves
    )
    uvicorn.Server(config).run(sockets=[sock])
