"""Run the app under uvicorn on an already bound socket (so the printed port is the real one).

Ctrl-C and SIGTERM end it cleanly with exit status 0: uvicorn would re-raise the signal after
its graceful shutdown (the process then dies of it), which reads as a crash to a supervisor.
"""

from __future__ import annotations

import contextlib
import signal
import socket
from collections.abc import Generator
from pathlib import Path
from types import FrameType

import uvicorn

from rgt.ui.app import create_app

GRACE_S = 2  # SSE streams never end by themselves: this long, then they are closed
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class QuietServer(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        previous = {sig: signal.signal(sig, self._stop) for sig in STOP_SIGNALS}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _stop(self, sig: int, frame: FrameType | None) -> None:
        self.handle_exit(sig, frame)


def serve(
    sock: socket.socket, home: Path, token: str | None, interval: float, results: tuple[Path, ...]
) -> None:
    app = create_app(home, token, interval, results)
    config = uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=GRACE_S,
    )
    QuietServer(config).run(sockets=[sock])
