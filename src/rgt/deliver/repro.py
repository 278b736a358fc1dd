"""One-command reproduction: rebuild every figure and rendered document from the evidence store.

``write_repro`` writes ``repro.sh`` in the workspace: it rebuilds each figure
(``rgt deliver figure``) and re-renders each document recorded in ``documents.json``.
``check_repro`` runs that script in a clean copy (a ``git clone`` when the workspace is in a git
repository, so anything uncommitted is missing there, as it would be for a reader; a copy without
the generated outputs otherwise) and compares every output by sha256: REPRODUCED, CHANGED, or
MISSING. Figures compare the image and the source data; provenance files differ by build time
and are compared by their ``digest``.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rgt._fs import atomic_write_bytes, sha256_file
from rgt.deliver.figures import list_figures, load_figure
from rgt.deliver.render import load_documents
from rgt.deliver.workspace import Workspace
from rgt.errors import UsageError

SCRIPT_NAME = "repro.sh"
TIMEOUT_S = 1800


@dataclass(frozen=True)
class OutputCheck:
    path: str
    status: str  # REPRODUCED | CHANGED | MISSING
    expected: str | None
    got: str | None


@dataclass
class ReproReport:
    clone: str
    checks: list[OutputCheck] = field(default_factory=list)
    log_tail: str = ""

    @property
    def ok(self) -> bool:
        return bool(self.checks) and all(c.status == "REPRODUCED" for c in self.checks)

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "clone": self.clone, "outputs": [asdict(c) for c in self.checks]}


def write_repro(ws: Workspace) -> Path:
    lines = [
        "#!/bin/sh",
        "# Rebuild every figure and document of this delivery from the recorded runs.",
        "# Written by `rgt deliver repro`; run it from anywhere: sh repro.sh",
        "set -eu",
        'cd "$(dirname "$0")"',
        'PY="${PYTHON:-python3}"',
    ]
    for name in list_figures(ws):
        lines.append(f'"$PY" -m rgt.cli deliver figure --workspace . {shlex.quote(name)}')
    for doc in load_documents(ws):
        template, out = shlex.quote(doc["template"]), shlex.quote(doc["out"])
        lines.append(f'"$PY" -m rgt.cli deliver render --workspace . {template} -o {out}')
    path = ws.root / SCRIPT_NAME
    atomic_write_bytes(str(path), ("\n".join(lines) + "\n").encode("utf-8"), mode=0o755)
    return path


def expected_outputs(ws: Workspace) -> dict[str, str]:
    """Workspace-relative output path -> the hash a reproduction must give."""
    outputs: dict[str, str] = {}
    for name in list_figures(ws):
        spec = load_figure(ws, name)
        for file in (spec.image, "source_data.csv"):
            _add_hash(outputs, ws, spec.folder / file)
        provenance = spec.folder / f"{name}.provenance.json"
        if provenance.is_file():
            digest = json.loads(provenance.read_text(encoding="utf-8")).get("digest")
            outputs[ws.rel(provenance) + "#digest"] = str(digest)
    for doc in load_documents(ws):
        _add_hash(outputs, ws, ws.root / doc["out"])
    return outputs


def _add_hash(outputs: dict[str, str], ws: Workspace, path: Path) -> None:
    outputs[ws.rel(path)] = sha256_file(str(path)) if path.is_file() else "absent"


def check_repro(ws: Workspace) -> ReproReport:
    if not (ws.root / SCRIPT_NAME).is_file():
        write_repro(ws)
    expected = expected_outputs(ws)
    with tempfile.TemporaryDirectory(prefix="rgt-repro-") as tmp:
        clone_ws = _clean_copy(ws, Path(tmp) / "clone", set(expected))
        report = ReproReport(str(clone_ws.root))
        report.log_tail = _run_script(clone_ws)
        got = expected_outputs(clone_ws) if clone_ws.root.is_dir() else {}
    for path, digest in sorted(expected.items()):
        seen = got.get(path)
        status = (
            "REPRODUCED" if seen == digest else "MISSING" if seen in (None, "absent") else "CHANGED"
        )
        report.checks.append(OutputCheck(path, status, digest, seen))
    return report


def _clean_copy(ws: Workspace, dest: Path, outputs: set[str]) -> Workspace:
    top = _git_toplevel(ws.root)
    if top is not None:
        subprocess.run(["git", "clone", "-q", "--", str(top), str(dest)], check=True, timeout=600)
        return Workspace(dest / ws.root.resolve().relative_to(top))
    generated = {ws.root / p.split("#")[0] for p in outputs}
    shutil.copytree(ws.root, dest, ignore=lambda d, names: [
        n for n in names if Path(d) / n in generated
    ])  # fmt: skip
    return Workspace(dest)


def _git_toplevel(path: Path) -> Path | None:
    proc = subprocess.run(
        ["git", "-C", str(path), "rev-parse", "--show-toplevel"],
        capture_output=True,
        text=True,
        check=False,
    )
    return Path(proc.stdout.strip()).resolve() if proc.returncode == 0 else None


def _run_script(clone_ws: Workspace) -> str:
    script = clone_ws.root / SCRIPT_NAME
    if not script.is_file():
        raise UsageError(
            f"{SCRIPT_NAME} is not in the clean clone of {clone_ws.root.name}",
            fix="commit repro.sh, the runs/ store, figures/ and templates, then check again",
        )
    env = {**os.environ, "PYTHON": sys.executable}
    proc = subprocess.run(
        ["sh", str(script)], capture_output=True, text=True, env=env, timeout=TIMEOUT_S, check=False
    )
    return (proc.stdout + proc.stderr)[-4000:]
