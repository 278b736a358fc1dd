"""The environment gate: the interpreter a job really runs and where its caches land, found by
`rgt audit` and enforced by `rgt run` from the machine's last recorded audit.

`rgt run` does not re-audit (an audit imports torch on the machine: seconds): it reads the
audit recorded at ``$RGT_HOME/audits/<machine>.json`` and refuses on a ``bug`` finding (``error``
in audits recorded before the one severity scale) unless ``--force``, saying how old the audit is.
"""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

from rgt._fs import atomic_write_json
from rgt.config import rgt_home
from rgt.errors import GateRefused, RgtError
from rgt.findings import Finding, from_json

GIB = 1 << 30


def finding(severity: str, check: str, text: str, fix: str = "", explain: str = "") -> Finding:
    """An audit finding: ``check`` is its kind, ``explain`` its `rgt explain` topic."""
    return Finding(check, severity, text, source="rgt audit", fix=fix, code=explain)


def interpreter_findings(r: dict[str, Any]) -> list[Finding]:
    found = r.get("interpreters")
    if not found:
        return []
    expected = found.get("expected")
    on_path = found.get("python") or found.get("python3")
    if expected and expected.get("error"):
        where = on_path.get("executable") if on_path else "nothing"
        return [
            finding(
                "bug",
                "interpreter",
                f"the profile's interpreter {expected['path']} does not run "
                f"({expected['error'].strip()[:120]}); jobs' `python` is {where}",
                "fix the profile's [environment] python (or `rgt audit --python PATH`) to the "
                "image's real environment",
            )
        ]
    if expected:
        return _mismatch(found, expected)
    if not on_path:
        return [
            finding(
                "bug",
                "interpreter",
                "no python or python3 on the PATH a job gets (non-interactive ssh)",
                "install python3, or run jobs with the interpreter's full path",
            )
        ]
    return []


def _mismatch(found: dict[str, Any], expected: dict[str, Any]) -> list[Finding]:
    out = []
    bindir = expected["path"].rsplit("/", 1)[0]
    for name in ("python", "python3"):
        got = found.get(name)
        if got and not got.get("error") and got.get("prefix") == expected["prefix"]:
            continue
        what = f"{got['executable']} (prefix {got.get('prefix')})" if got else "not found"
        out.append(
            finding(
                "bug",
                "interpreter",
                f"`{name}` in a non-interactive ssh shell is {what}, not the environment "
                f"{expected['path']} (prefix {expected['prefix']}, Python {expected['version']})",
                f"run the job with the full path (`rgt run NAME -- {expected['path']} "
                f"train.py`) or put {bindir} first: "
                f"--env PATH={bindir}:/usr/local/bin:/usr/bin:/bin",
            )
        )
    return out


def cache_findings(r: dict[str, Any]) -> list[Finding]:
    """A cache on a smaller filesystem than the data (durable) tier, with the exact variable."""
    durable = (r.get("tiers") or [{}])[0]
    data_mount, data_total = durable.get("mount"), durable.get("bytes_total") or 0
    base = str(durable.get("tier") or durable.get("path") or "").rstrip("/")
    out = []
    for c in r.get("caches") or []:
        total = c.get("bytes_total")
        if total is None or c.get("mount") == data_mount or total >= data_total:
            continue
        target = f"{base}/.cache/{c['tool'].replace(' ', '-')}"
        out.append(
            finding(
                "warning",
                "cache disk",
                f"{c['tool']} cache {c['dir']} ({c['source']}) is on {c['mount']}: "
                f"{total / GIB:.1f} GiB, {(c.get('bytes_free') or 0) / GIB:.1f} GiB free; the data "
                f"disk {data_mount} has {(durable.get('bytes_free') or 0) / GIB:.1f} GiB free",
                f"point it at the data disk: --env {c['fix_var']}={target} (or in the profile's "
                "[network.env] so every job gets it)",
            )
        )
    return out


def audit_file(machine: str) -> Path:
    return rgt_home() / "audits" / f"{quote(machine, safe='')}.json"


def record(machine: str, data: dict[str, Any]) -> None:
    path = audit_file(machine)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(str(path), {"recorded": time.time(), "findings": data["findings"]})
    from rgt.watch import routes

    routes.record(machine, data.get("routes") or {})


def check_gate(machine: str, force: bool) -> list[str]:
    """Notes for `rgt run`; raises ``GateRefused`` on a bug of the last audit (no --force)."""
    try:
        last = json.loads(audit_file(machine).read_text())
    except (OSError, ValueError):
        return []
    bugs = [f for f in _recorded(last, str(audit_file(machine))) if f.severity == "bug"]
    if not bugs:
        return []
    age = _age(time.time() - float(last.get("recorded") or 0))
    reasons = [f"{f.kind}: {f.message} (fix: {f.fix})" for f in bugs]
    if force:
        return [f"--force: starting despite {len(bugs)} bug(s) of the audit {age} ago"]
    raise GateRefused(
        f"the last audit of {machine} ({age} ago) found {len(bugs)} bug(s)",
        reasons,
        fix=f"fix them and run `rgt audit {machine}` again, or start anyway with --force",
    )


def _recorded(last: Any, where: str) -> list[Finding]:
    """The findings of a recorded audit; one this rgt cannot read (an unknown severity word, a
    hand edit) does not hold up a run."""
    items = last.get("findings") if isinstance(last, dict) else None
    found = []
    for item in items if isinstance(items, list) else []:
        with contextlib.suppress(RgtError):
            found.append(from_json(item, where))
    return found


def _age(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
