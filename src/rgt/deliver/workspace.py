"""The delivery workspace: one object that knows where everything lives.

<workspace>/
  rgt.toml            marks the workspace ([deliver] section)
  EVIDENCE.json       claims (schema rgt.evidence/1)
  runs/<run-id>/      recorded runs, read-only, never modified (RECORD.json lists their hashes)
  figures/<name>/     figure.toml + the plotting script; builds write the image, source data
                      and <name>.provenance.json next to them
  findings/*.json     integrity findings from VERIFY (see rgt.deliver.gate)
  documents.json      which templates were rendered to which outputs (for repro)
  DISCLOSURE.md       written by the gate
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rgt._fs import atomic_write_bytes, atomic_write_json
from rgt.errors import UsageError

MARKER = "rgt.toml"
EVIDENCE_NAME = "EVIDENCE.json"
EVIDENCE_SCHEMA = "rgt.evidence/1"
_TOML_SECTION = "[deliver]"
_DEFAULT_TOML = """\
# rgt delivery workspace: recorded runs, claims, figures and rendered documents.
[deliver]
# reconcile scans this directory (relative to this file) for copies of claimed numbers.
scan_root = "."
"""


@dataclass(frozen=True)
class Workspace:
    root: Path

    @property
    def runs(self) -> Path:
        return self.root / "runs"

    @property
    def figures(self) -> Path:
        return self.root / "figures"

    @property
    def findings(self) -> Path:
        return self.root / "findings"

    @property
    def evidence(self) -> Path:
        return self.root / EVIDENCE_NAME

    @property
    def documents(self) -> Path:
        return self.root / "documents.json"

    @property
    def disclosure(self) -> Path:
        return self.root / "DISCLOSURE.md"

    def run_dir(self, run_id: str) -> Path:
        return self.runs / run_id

    def figure_dir(self, name: str) -> Path:
        return self.figures / name

    def rel(self, path: Path) -> str:
        """``path`` relative to the workspace when inside it (how files cite each other)."""
        try:
            return path.resolve().relative_to(self.root.resolve()).as_posix()
        except ValueError:
            return str(path)


def init_workspace(directory: Path | str) -> Workspace:
    """Scaffold a workspace in ``directory``; existing files are kept (idempotent)."""
    ws = Workspace(Path(directory).absolute())
    for folder in (ws.root, ws.runs, ws.figures, ws.findings):
        folder.mkdir(parents=True, exist_ok=True)
    if not (ws.root / MARKER).exists():
        atomic_write_bytes(str(ws.root / MARKER), _DEFAULT_TOML.encode("utf-8"))
    if not ws.evidence.exists():
        atomic_write_json(str(ws.evidence), {"schema": EVIDENCE_SCHEMA, "claims": []})
    return ws


def find_workspace(start: Path | str | None = None) -> Workspace:
    """The nearest directory from ``start`` upwards that holds a workspace ``rgt.toml``."""
    here = Path(start or Path.cwd()).absolute()
    for directory in (here, *here.parents):
        marker = directory / MARKER
        if marker.is_file() and (directory / EVIDENCE_NAME).is_file():
            return Workspace(directory)
    raise UsageError(
        f"no delivery workspace at or above {here}",
        fix="create one with `rgt deliver init DIR`, or pass --workspace DIR",
    )
