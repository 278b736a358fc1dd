"""The network environment a job gets on a machine, from its profile's ``[network]`` section.

Platforms behind slow or blocked routes (AutoDL, 恒源云, 矩池云, Featurize, 揽睿星舟) document a
Hugging Face mirror, a PyPI mirror and extra variables; this turns them into the variables every
job on the machine gets without ``--env``:

- ``HF_ENDPOINT`` from ``hf_endpoint``; ``PIP_INDEX_URL`` (and ``PIP_TRUSTED_HOST`` when the index
  is plain http) from ``pip_index``; ``CONDA_CHANNEL_ALIAS`` from a conda mirror; everything in
  ``[network.env]`` as written;
- ``no_proxy``/``NO_PROXY`` always list localhost, 127.0.0.1, ::1 and the mirrors' hosts: a
  platform accelerator (AutoDL's ``network_turbo``) exports ``http_proxy`` for the whole shell,
  and without them it catches local services (TensorBoard, a local model server) and the
  platform's own mirrors.

The routes ``rgt audit`` chose from the machine (``$RGT_HOME/routes/<machine>.json``) replace
the profile's choice per kind: ``mirror``/``direct`` set the variable to that base URL,
``accelerator`` sets it to the direct URL and lists the kind in ``RGT_ACCELERATE``, which only
rgt's downloader reads (it sources the profile's ``proxy_hook``, given as ``RGT_PROXY_HOOK``,
for its own process; a job never runs under the accelerator); for pip, ``PIP_PROXY`` names the
proxy the audit went through, so pip alone uses it. The user's choices at ``rgt up``
(``--mirror hf=URL``, ``--no-mirrors``) win over both; a job's own ``--env`` wins over all.
Nothing here runs on the machine.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

from rgt.config import rgt_home
from rgt.errors import UsageError

MIRROR_KINDS = ("hf", "pip", "conda")
LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1")


@dataclass(frozen=True)
class NetworkPlan:
    """What jobs on one machine get, and where each value came from."""

    env: dict[str, str]
    mirrors: dict[str, str]  # kind -> URL
    source: str  # "profile autodl", "--mirror", "off (--no-mirrors)", "none"

    def to_json(self) -> dict[str, Any]:
        return {"env": dict(self.env), "mirrors": dict(self.mirrors), "source": self.source}

    def notes(self) -> list[str]:
        if not self.env:
            return [f"network: no mirrors ({self.source})"] if self.source != "none" else []
        shown = ", ".join(f"{k}={v}" for k, v in sorted(self.env.items()) if k != "NO_PROXY")
        return [
            f"network ({self.source}): jobs get {shown}",
            "  change with `rgt up … --mirror hf=URL` / `--no-mirrors`, or per job with --env",
        ]


def parse_mirrors(items: tuple[str, ...] | list[str]) -> dict[str, str]:
    """``("hf=https://…", "pip=https://…")`` -> ``{"hf": …, "pip": …}``; bad input is a usage
    error naming the accepted form."""
    out: dict[str, str] = {}
    for item in items:
        kind, sep, url = item.partition("=")
        if not sep or kind not in MIRROR_KINDS:
            raise UsageError(
                f"--mirror {item!r}: expected KIND=URL with KIND one of {', '.join(MIRROR_KINDS)}",
                fix="e.g. --mirror hf=https://hf-mirror.com",
            )
        _check_url(kind, url)
        out[kind] = url
    return out


def plan_network(
    raw: Mapping[str, Any],
    profile: str,
    mirrors: Mapping[str, str] | None = None,
    enabled: bool = True,
    routes: Mapping[str, Mapping[str, str]] | None = None,
) -> NetworkPlan:
    """The plan for a machine of ``profile`` (``raw``: its validated ``[network]`` table);
    ``routes``: what the last audit chose per kind (``{"chosen", "base"}``)."""
    if not enabled:
        return NetworkPlan(env={}, mirrors={}, source="off (--no-mirrors)")
    chosen = {
        kind: url
        for kind, url in (("hf", raw.get("hf_endpoint")), ("pip", raw.get("pip_index")))
        if isinstance(url, str) and url
    }
    extra = {str(k): str(v) for k, v in (raw.get("env") or {}).items()}
    source = f"profile {profile}" if chosen or extra else "none"
    audited = {k: r for k, r in (routes or {}).items() if k not in (mirrors or {})}
    accelerate = sorted(k for k, r in audited.items() if r.get("chosen") == "accelerator")
    if audited:
        chosen.update({k: str(r["base"]) for k, r in audited.items()})
        source += " + routes of the last audit"
    if mirrors:
        chosen.update(mirrors)
        source = "--mirror" if source == "none" else f"{source} + --mirror"
    env = dict(extra)
    env.update(_mirror_env(chosen))
    if chosen or raw.get("proxy_hook"):
        bypass = [u for k, u in chosen.items() if k not in accelerate]
        hosts = [h for h in (urlsplit(u).hostname for u in bypass) if h]
        env["no_proxy"] = env["NO_PROXY"] = ",".join(dict.fromkeys([*LOCAL_HOSTS, *hosts]))
    env.update(_accelerator_env(raw, accelerate))
    pip_proxy = audited.get("pip", {}).get("proxy") if "pip" in accelerate else None
    if pip_proxy and raw.get("proxy_hook"):
        env["PIP_PROXY"] = pip_proxy  # pip alone goes through the accelerator
    return NetworkPlan(env=env, mirrors=chosen, source=source)


def _accelerator_env(raw: Mapping[str, Any], accelerate: list[str]) -> dict[str, str]:
    """``RGT_PROXY_HOOK``: the command that turns the platform's accelerator on, for rgt's
    downloader only; ``RGT_ACCELERATE``: the kinds it is used for (``url``: plain URL fetches,
    always when there is a hook; ``hf``/``pip`` when the audit chose the accelerator)."""
    hook = raw.get("proxy_hook")
    if not isinstance(hook, str) or not hook:
        return {}
    return {"RGT_PROXY_HOOK": hook, "RGT_ACCELERATE": ",".join([*accelerate, "url"])}


def machine_plan(
    profile_name: str, connection: Mapping[str, Any], machine: str = "", registered: str = ""
) -> NetworkPlan:
    """The plan of a registered machine: its profile's section, the routes its last audit chose
    (when ``machine`` is given) and what was chosen at ``up`` (kept in the machine's connection
    record as ``mirrors`` / ``no_mirrors``)."""
    from rgt.profiles import load_profile

    raw = load_profile(profile_name).raw.get("network") or {}
    mirrors = connection.get("mirrors") or {}
    chosen = recorded_routes(machine, registered) if machine else {}
    enabled = not connection.get("no_mirrors")
    return plan_network(raw, profile_name, mirrors, enabled=enabled, routes=chosen)


def routes_file(machine: str) -> Path:
    return rgt_home() / "routes" / f"{quote(machine, safe='')}.json"


def recorded_routes(machine: str, registered: str = "") -> dict[str, dict[str, str]]:
    """``{kind: {"chosen", "base"}}`` of the machine's last audit; nothing when none was
    recorded, or it was recorded before the machine was registered (an earlier machine of that
    name; both are ``utcnow()`` strings)."""
    try:
        doc = json.loads(routes_file(machine).read_text())
    except (OSError, ValueError):
        return {}
    if registered and str(doc.get("recorded") or "") < registered:
        return {}
    routes = doc.get("routes") or {}
    return {
        str(k): {
            "chosen": str(r["chosen"]),
            "base": str(r["base"]),
            **({"proxy": str(r["proxy"])} if r.get("proxy") else {}),
        }
        for k, r in routes.items()
        if isinstance(r, dict) and r.get("chosen") and r.get("base")
    }


def _mirror_env(chosen: Mapping[str, str]) -> dict[str, str]:
    env: dict[str, str] = {}
    if "hf" in chosen:
        env["HF_ENDPOINT"] = chosen["hf"].rstrip("/")
    if "pip" in chosen:
        env["PIP_INDEX_URL"] = chosen["pip"]
        parts = urlsplit(chosen["pip"])
        if parts.scheme == "http" and parts.hostname:
            env["PIP_TRUSTED_HOST"] = parts.hostname  # pip refuses plain http otherwise
    if "conda" in chosen:
        env["CONDA_CHANNEL_ALIAS"] = chosen["conda"]
    return env


def _check_url(kind: str, url: str) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(
            f"--mirror {kind}={url!r}: not an http(s) URL",
            fix=f"give the mirror's base URL, e.g. --mirror {kind}=https://…",
        )
    if any(c in url for c in " \t\r\n\0"):
        raise UsageError(
            f"--mirror {kind}: the URL has whitespace or control characters",
            fix="percent-encode them (a space is %20)",
        )
