"""The ``--notify`` webhook: a bearer secret, handled like ``--secret`` values.

A Slack/Discord/ntfy webhook URL lets anyone who reads it post to the channel, so it is never
given in argv (``ps``, shell history), never written to ``spec.json``, the state DB, logs or
events. ``--notify SOURCE`` names where the URL is read on this laptop:

- ``env:NAME``: the environment variable ``NAME``;
- ``credentials:NAME``: key ``NAME`` of the ``[notify]`` table in ``$RGT_HOME/credentials.toml``
  (refused when the file is readable by group or others: ``chmod 600`` it);
- ``-``: one line on stdin.

The spec records only the source (``"env:SLACK_HOOK"``); the URL travels to the agent over
ssh stdin with the secret env values (under the key ``NOTIFY_SECRET``) and lives in the agent's
memory, where every event, status and log line is redacted against it. ``rgt resume`` reads
the same source again; a URL given on stdin is not kept anywhere, so a resumed agent has no
webhook unless ``rgt resume`` is given ``--notify`` again.
"""

from __future__ import annotations

import os
import re
import stat
import sys
from dataclasses import dataclass, field
from typing import IO

from rgt._log import register_secrets
from rgt.agent._webhook import NOTIFY_SECRET
from rgt.config import rgt_home
from rgt.errors import UsageError

CREDENTIALS_FILE = "credentials.toml"
STDIN = "stdin"
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_USAGE = "--notify env:NAME, --notify credentials:NAME or --notify - (one line on stdin)"


@dataclass(frozen=True)
class Webhook:
    """Where the URL came from (recorded) and the URL itself (memory only, never printed)."""

    source: str
    url: str = field(repr=False)

    def secrets(self) -> dict[str, str]:
        register_secrets([self.url])  # never in a debug log line
        return {NOTIFY_SECRET: self.url}


def resolve(source: str, stdin: IO[str] | None = None) -> Webhook:
    """Read the URL named by ``source`` (see the module docstring)."""
    if "://" in source or source.startswith(("ntfy+", "slack+")):
        raise UsageError(
            "a webhook URL is a bearer secret; it must not be given on the command line "
            "(it shows in `ps` and your shell history)",
            fix=f"export it and use {_USAGE}",
        )
    if source in ("-", STDIN):
        line = (stdin or sys.stdin).readline().strip()
        return Webhook(STDIN, _checked(line, "stdin"))
    kind, _, name = source.partition(":")
    if kind == "env" and _ENV_NAME.fullmatch(name):
        value = os.environ.get(name)
        if value is None:
            raise UsageError(f"${name} is not set", fix=f"export {name}=… first")
        return Webhook(source, _checked(value, f"${name}"))
    if kind == "credentials" and _ENV_NAME.fullmatch(name):
        return Webhook(source, _checked(_credential(name), f"credentials {name}"))
    raise UsageError(f"unknown --notify source {source!r}", fix=f"use {_USAGE}")


def reread(source: str | None) -> tuple[Webhook | None, str | None]:
    """For ``rgt resume``: the webhook read again from its recorded source, or a note why not."""
    if not source:
        return None, None
    if source == STDIN:
        return None, "the webhook URL was given on stdin and is not kept: this agent has none"
    return resolve(source), None


def _checked(url: str, where: str) -> str:
    target = url.split("+", 1)[1] if url.startswith(("ntfy+", "slack+")) else url
    if not target.startswith(("http://", "https://")) or any(c.isspace() for c in url):
        raise UsageError(
            f"the webhook URL from {where} is not an http(s) URL",
            fix="give the URL your service shows (https://…), optionally prefixed ntfy+ or slack+",
        )
    return url


def _credential(name: str) -> str:
    from rgt.config import loads_toml

    path = rgt_home() / CREDENTIALS_FILE
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as exc:
        raise UsageError(
            f"cannot read {path} ({exc.strerror})",
            fix=f'create it with `[notify]` and `{name} = "https://…"`, then `chmod 600` it',
        ) from exc
    with os.fdopen(fd, "rb") as handle:
        if stat.S_IMODE(os.fstat(handle.fileno()).st_mode) & 0o077:
            raise UsageError(
                f"{path} is readable by others; refusing to read secrets from it",
                fix=f"chmod 600 {path}",
            )
        try:
            data = loads_toml(handle.read().decode("utf-8"))
        except ValueError as exc:  # TOMLDecodeError, UnicodeDecodeError
            raise UsageError(f"{path} is not valid TOML ({exc})", fix="fix its syntax") from exc
    value = (data.get("notify") or {}).get(name)
    if not isinstance(value, str):
        raise UsageError(f"{path} has no [notify] {name}", fix=f'add `{name} = "https://…"`')
    return value
