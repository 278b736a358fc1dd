"""One call of a machine-wide agent subcommand (``patrol``, ``audit``, ``reap``).

The agent file is versioned by content, so the first call after an upgrade finds no file:
only then does the caller pay the extra round trips to install it. A steady-state refresh is
exactly one ``transport.run``.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from typing import Any

from rgt import clip
from rgt.backends.base import Backend
from rgt.errors import BackendError


@functools.lru_cache(maxsize=1)
def _agent_version() -> str:
    """Hashing the bundled sources once per process, not once per machine."""
    from rgt.agent.build import agent_version

    return agent_version()


def machine_call(
    backend: Backend, subcommand: str, args: Sequence[str] = (), timeout: float = 120
) -> dict[str, Any]:
    """Run ``agent SUBCOMMAND ROOT ARGS…`` on the machine and return its JSON document.
    ``TransportError`` (the connection) propagates: it says nothing about any job."""
    agent = backend.root.agent_file(_agent_version())
    # -S: the agent is stdlib-only, so skipping site-packages (and its .pth files) saves a
    # third of its start-up on every refresh of every machine.
    argv = [backend.python, "-S", agent, subcommand, backend.root.root, *args]
    result = backend.transport.run(argv, timeout=timeout)
    # The agent was not there when this ran: install it (once) and run again. Another thread
    # or process may have installed it since, so "can't open file" counts as missing too.
    missing = not result.ok and "can't open file" in result.stderr_tail()
    if not result.ok and (missing or not backend.transport.exists(agent)):
        backend.install_agent()
        result = backend.transport.run(argv, timeout=timeout)
    if not result.ok:
        raise BackendError(
            f"agent {subcommand} failed on {backend.machine.name}",
            backend=backend.kind,
            returncode=result.returncode,
            stderr_tail=result.stderr_tail(),
            fix=f"check that `{backend.python}` runs on the machine (rgt needs Python >= 3.8)",
        )
    try:
        data = json.loads(result.text())
    except (json.JSONDecodeError, RecursionError) as exc:
        raise BackendError(
            f"agent {subcommand} printed no JSON on {backend.machine.name}",
            backend=backend.kind,
            stderr_tail=result.text()[-2000:],
        ) from exc
    if not isinstance(data, dict):
        raise BackendError(
            f"agent {subcommand} printed JSON that is not an object on {backend.machine.name}",
            backend=backend.kind,
            stderr_tail=clip.text(result.text(), 2000),
        )
    # Every string the machine sent, clipped here, where it is read (rgt.clip).
    return clip.machine_document(data)
