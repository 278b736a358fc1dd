"""Preemption notices from the instance metadata service, polled by the autostop watcher.

A spot machine is told before it is taken: AWS answers ``/latest/meta-data/spot/instance-action``
with ``{"action": "terminate", "time": …}`` two minutes ahead (404 while nothing is planned);
GCP's ``computeMetadata/v1/instance/preempted`` says ``TRUE`` (header ``Metadata-Flavor:
Google``, about 30 s ahead); Azure Scheduled Events list a ``Preempt`` event (header
``Metadata: true``). The profile names the endpoint (``[preemption]``); the policy carries it,
and tests point it at a local fake server (never at 169.254.169.254).

Each poll has a short deadline: a machine without the service (connection refused, timeout)
simply has no notice. Python 3.8, stdlib only.
"""

from __future__ import annotations

import json
from typing import Any, Dict, Optional

POLL_TIMEOUT_S = 2.0
READ_LIMIT = 64 * 1024


def poll(spec: Optional[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    """The notice (``kind``, ``action``, ``time``, ``raw``) when the endpoint announces one."""
    if not spec or not spec.get("url"):
        return None
    headers = dict(spec.get("headers") or {})
    if spec.get("kind") == "aws":
        headers.update(_imds_token(str(spec["url"])))
    status, body = _get(str(spec["url"]), headers)
    if status != 200 or not body:
        return None
    return parse(str(spec.get("kind") or "aws"), body)


def _imds_token(url: str) -> Dict[str, str]:
    """AWS IMDSv2 (the default on new instances) answers a GET only with a session token from
    ``PUT /latest/api/token``; an IMDSv1-only machine refuses the PUT, and then none is sent."""
    base = url.split("/latest/", 1)[0]
    ttl = {"X-aws-ec2-metadata-token-ttl-seconds": "21600"}
    status, token = _get(base + "/latest/api/token", ttl, method="PUT")
    return {"X-aws-ec2-metadata-token": token.strip()} if status == 200 and token else {}


def _get(url: str, headers: Dict[str, str], method: str = "GET") -> "tuple[int, str]":
    import urllib.error
    import urllib.request

    # No proxy: the metadata service is link-local, and a proxy would answer for it.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    request = urllib.request.Request(url, headers=headers, method=method)
    try:
        with opener.open(request, timeout=POLL_TIMEOUT_S) as response:
            return int(response.status), response.read(READ_LIMIT).decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        return int(exc.code), ""
    except (OSError, ValueError):
        return 0, ""


def parse(kind: str, body: str) -> Optional[Dict[str, Any]]:
    """A notice from one answer of the endpoint, or None when it announces nothing."""
    text = body.strip()
    if kind == "gcp":
        return (
            {"kind": kind, "action": "preempt", "time": None, "raw": text}
            if text == "TRUE"
            else None
        )
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    if kind == "azure":
        return _azure(doc, text)
    if isinstance(doc, dict) and doc.get("action") in ("terminate", "stop", "hibernate"):
        return {"kind": kind, "action": doc["action"], "time": doc.get("time"), "raw": text[:500]}
    return None


def _azure(doc: Any, text: str) -> Optional[Dict[str, Any]]:
    events = doc.get("Events") if isinstance(doc, dict) else None
    for event in events or []:
        if isinstance(event, dict) and event.get("EventType") == "Preempt":
            when = event.get("NotBefore")
            return {"kind": "azure", "action": "preempt", "time": when, "raw": text[:500]}
    return None
