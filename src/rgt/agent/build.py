"""Pack the agent into ``agent-<version>.pyz`` (runs on the CLI side).

The version is ``rgt.__version__`` plus the first 12 hex digits of the sha256 of every bundled
source, so an edited agent gets a new file name and a machine never runs a stale copy under
the name of a new one. The archive is deterministic (sorted entries, fixed timestamps and
modes): the same sources always give the same bytes, so re-uploading can be skipped by hash.

Bundled, and nothing else (``tests/agent/test_bundle_layout.py`` holds the list):

- ``rgt/agent/`` with its subpackages ``probes/`` (the machine readings) and ``verdicts/`` (the
  artifact verifier), every module except this one: everything the agent itself runs;
- ``rgt/triage/`` with its JSON rules, which the agent's classifier reads; it sits outside
  ``agent/`` because ``rgt.triage.scan_file`` is public, imported here by ``rgt triage``;
- ``rgt/ckpt/``, never imported by the agent: it puts it on each job's import path after the
  job's own packages (``rgt.agent._pypath``), so a script that imports ``rgt.ckpt`` runs on a
  machine where rgt was never installed; it keeps its public name for the same reason;
- three shared single files: ``rgt/__init__.py``, ``rgt/_fs.py`` and ``rgt/errors.py`` (which
  ``rgt.ckpt`` imports).
"""

from __future__ import annotations

import hashlib
import io
import zipfile
from pathlib import Path

import rgt
from rgt import _fs

PACKAGE_ROOT = Path(rgt.__file__).resolve().parent
SINGLE_FILES = ("__init__.py", "_fs.py", "errors.py")
PACKAGES = {
    "agent": ("**/*.py",),  # with its subpackages probes/ and verdicts/
    "triage": ("*.py", "rules/*.json"),
    "ckpt": ("*.py", "adapters/*.py"),  # for the job, never imported by the agent itself
}
NOT_BUNDLED = frozenset({"agent/build.py"})  # CLI-side, modern Python
ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)
SHEBANG = b"#!/usr/bin/env python3\n"
MAIN_TEMPLATE = """# rgt agent {version}: python3 agent-{version}.pyz run|status|cancel JOB_DIR
import sys

from rgt.agent.cli import main

sys.exit(main(sys.argv[1:], version="{version}"))
"""


def bundled_sources() -> list[tuple[str, bytes]]:
    """(archive name, bytes) of every bundled file, sorted by name."""
    rels = set(SINGLE_FILES)
    for package, patterns in PACKAGES.items():
        for pattern in patterns:
            for path in (PACKAGE_ROOT / package).glob(pattern):
                rels.add(path.relative_to(PACKAGE_ROOT).as_posix())
    rels -= NOT_BUNDLED
    files = [(f"rgt/{rel}", (PACKAGE_ROOT / rel).read_bytes()) for rel in sorted(rels)]
    return files + _learned_rules()


def _learned_rules() -> list[tuple[str, bytes]]:
    """The user's learned triage rules, one family file, so the agent's verdicts use them too."""
    from rgt.config import rgt_home
    from rgt.triage.learned import merged_document

    doc = merged_document(str(rgt_home() / "rules"))
    return [("rgt/triage/user_rules.json", doc.encode())] if doc else []


def _content_hash(files: list[tuple[str, bytes]]) -> str:
    digest = hashlib.sha256()
    for name, data in files:
        digest.update(name.encode() + b"\0" + str(len(data)).encode() + b"\0" + data)
    return digest.hexdigest()


def agent_version() -> str:
    return f"{rgt.__version__}-{_content_hash(bundled_sources())[:12]}"


def build_agent(dest_dir: Path) -> Path:
    """Write ``dest_dir/agent-<version>.pyz`` (atomically) and return its path."""
    files = bundled_sources()
    version = f"{rgt.__version__}-{_content_hash(files)[:12]}"
    main = MAIN_TEMPLATE.format(version=version).encode()
    dest_dir.mkdir(parents=True, exist_ok=True)
    target = dest_dir / f"agent-{version}.pyz"
    _fs.atomic_write_bytes(str(target), _archive([("__main__.py", main), *files]), mode=0o755)
    return target


def _archive(files: list[tuple[str, bytes]]) -> bytes:
    buffer = io.BytesIO()
    buffer.write(SHEBANG)
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in sorted(files):
            info = zipfile.ZipInfo(name, date_time=ZIP_EPOCH)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            info.create_system = 3  # unix, whatever the building OS
            archive.writestr(info, data)
    return buffer.getvalue()
