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

The user's choices at ``rgt up`` (``--mirror hf=URL``, ``--no-mirrors``) override the profile;
a job's own ``--env`` overrides both. Nothing here runs on the machine.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

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
) -> NetworkPlan:
    """The plan for a machine of ``profile`` (``raw``: its validated ``[network]`` table)."""
    if not enabled:
        return NetworkPlan(env={}, mirrors={}, source="off (--no-mirrors)")
    chosen = {
        kind: url
        for kind, url in (("hf", raw.get("hf_endpoint")), ("pip", raw.get("pip_index")))
        if isinstance(url, str) and url
    }
    extra = {str(k): str(v) for k, v in (raw.get("env") or {}).items()}
    source = f"profile {profile}" if chosen or extra else "none"
    if mirrors:
        chosen.update(mirrors)
        source = "--mirror" if source == "none" else f"profile {profile} + --mirror"
    env = dict(extra)
    env.update(_mirror_env(chosen))
    if chosen or raw.get("proxy_hook"):
        hosts = [h for h in (urlsplit(u).hostname for u in chosen.values()) if h]
        env["no_proxy"] = env["NO_PROXY"] = ",".join(dict.fromkeys([*LOCAL_HOSTS, *hosts]))
    return NetworkPlan(env=env, mirrors=chosen, source=source)


def machine_plan(profile_name: str, connection: Mapping[str, Any]) -> NetworkPlan:
    """The plan of a registered machine: its profile's section plus what was chosen at ``up``
    (kept in the machine's connection record as ``mirrors`` / ``no_mirrors``)."""
    from rgt.profiles import load_profile

    raw = load_profile(profile_name).raw.get("network") or {}
    mirrors = connection.get("mirrors") or {}
    return plan_network(raw, profile_name, mirrors, enabled=not connection.get("no_mirrors"))


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
