"""Webhook bodies: so a phone hears about a dead job or an idle meter with the laptop closed.

The URL picks the format:

- ``ntfy+https://ntfy.sh/TOPIC`` or any ``ntfy.sh`` URL: an ntfy-style plain-text POST (the
  message is the body; ``Title``, ``Priority`` and ``Tags`` headers);
- ``slack+https://…`` or a ``hooks.slack.com`` URL: a Slack-compatible JSON body
  (``{"text": …}``, which Mattermost, Rocket.Chat and Discord's ``/slack`` endpoint read too);
- anything else: the event as JSON plus a ``text`` field (Slack-readable, and every field for
  a script).

The URL is a bearer secret: it arrives over stdin with the secret env values (``NOTIFY_SECRET``),
never in spec.json, and the recorder redacts it from everything it writes.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any, Dict, Optional, Tuple

if TYPE_CHECKING:  # imported where used: an agent without a webhook never pays for urllib
    import urllib.request

# The key the URL travels under in the agent's secrets (stdin JSON, never spec.json): "=" cannot
# appear in an environment variable's name, so no `--secret NAME` can collide with it, and the
# job never sees it (only declared secrets reach its environment).
NOTIFY_SECRET = "=notify_url"

URGENT = frozenset(["failed", "nan_loss", "gpu_idle", "disk_nearly_full", "memory_near_limit"])


def scrub_environ(url: Optional[str]) -> None:
    """Remove from the agent's environment every variable that holds the URL: an agent started
    by the local backend inherits ``rgt run``'s environment (``--notify env:NAME``), and the job's
    environment is built from the agent's: the job must never see the hook."""
    if url:
        for name in [n for n, value in os.environ.items() if url in value]:
            del os.environ[name]


def split_format(url: str) -> Tuple[str, str]:
    """(format, real URL) for a notify URL."""
    for prefix in ("ntfy", "slack"):
        if url.startswith(prefix + "+"):
            return prefix, url[len(prefix) + 1 :]
    host = url.split("://", 1)[-1].split("/", 1)[0].lower()
    if host == "ntfy.sh" or host.endswith(".ntfy.sh"):
        return "ntfy", url
    if host == "hooks.slack.com":
        return "slack", url
    return "json", url


def text(record: Dict[str, Any]) -> str:
    line = "rgt job %s: %s (attempt %s)" % (record["job_id"], record["kind"], record["attempt"])
    if record.get("next"):
        line += " - next: %s" % record["next"]
    return line


def request(url: str, record: Dict[str, Any]) -> "urllib.request.Request":
    import urllib.request

    kind, target = split_format(url)
    message = text(record)
    headers = {"Content-Type": "application/json"}
    if kind == "ntfy":
        body = message.encode("utf-8")
        headers = {
            "Content-Type": "text/plain; charset=utf-8",
            "Title": "rgt %s: %s" % (record["kind"], record["job_id"]),
            "Priority": "high" if record["kind"] in URGENT else "default",
            "Tags": "rotating_light" if record["kind"] in URGENT else "robot",
        }
    elif kind == "slack":
        body = json.dumps({"text": message}, sort_keys=True).encode("utf-8")
    else:
        body = json.dumps(dict(record, text=message), sort_keys=True).encode("utf-8")
    return urllib.request.Request(target, data=body, method="POST", headers=headers)
