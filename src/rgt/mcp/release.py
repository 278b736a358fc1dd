"""The ``down`` tool: an agent may ask to release a machine; only a human can approve it.

``down`` is ``rgt down NAME --yes --json``, through the same teardown gate
(``rgt.lifecycle.teardown``):
``--yes`` means "never ask", so the tool never prompts on a terminal the server might share with
its host. When the gate lacks only the approval, the answer is ``approval_required`` with the
exact command the human runs in their own terminal (``rgt approve NAME``, which reads the
answer, and the PIN once set, from the controlling terminal, never from stdin, argv or the
environment). There is no approve tool, and
no parameter of any tool reaches ``rgt approve``; once the human has approved, the agent calls
``down`` again and the gate releases the machine.
"""

from __future__ import annotations

from typing import Any

from rgt.mcp._call import as_command, document
from rgt.mcp._invoke import CommandFailed

APPROVAL_REQUIRED = "approval_required"


def down(name: str, keep_volume: bool = False, rehash: bool = False) -> dict[str, Any]:
    """Release machine NAME through the teardown gate (every job ended, pulled, verified, and
    approved by a human). When only the approval is missing it returns `approval_required` and
    the command the HUMAN must run in their own terminal; you cannot approve. Ask them, then
    call `down` again."""
    try:
        return _release(name, keep_volume, rehash)
    except CommandFailed as exc:
        verdict = exc.document.get("verdict") or {}
        if not verdict.get("only_approval_missing"):
            raise
        return approval_required(name, exc.document)


def _release(name: str, keep_volume: bool, rehash: bool) -> dict[str, Any]:
    """``rgt down NAME --yes``: the teardown gate with no one to ask (``needs_human``)."""
    from rgt.errors import needs_human
    from rgt.lifecycle.teardown import teardown
    from rgt.state.store import Store

    with as_command(["down"], [name], yes=True, keep_volume=keep_volume, rehash=rehash):
        store = Store.open()
        return document(
            teardown(store, name, yes=True, check_only=False, keep_volume=keep_volume,
                     rehash=rehash, consent=needs_human)
        )  # fmt: skip


def approval_required(name: str, refused: dict[str, Any]) -> dict[str, Any]:
    command = f"rgt approve {name}"
    return {
        "status": APPROVAL_REQUIRED,
        "machine": name,
        "released": False,
        "human_command": command,
        "message": (
            f"everything on {name} is pulled and verified; releasing it needs a human's "
            f"approval. Ask the user to run `{command}` in their own terminal, then call "
            "`down` again. No tool can approve."
        ),
        "gate": refused.get("verdict"),
        "notes": refused.get("notes") or [],
    }
