"""`rgt run`'s interpreter check: a torch job must find torch in the Python the machine runs.

A job's ``python`` is whatever a non-interactive shell on the machine finds first on its PATH
(no ``conda activate``, no ``~/.bashrc``), often a system Python with nothing installed; the job
then dies with ``import_error`` after the launch, the probe and the user's attention are spent.
So a command that starts with ``python``/``python3``/``pythonX.Y`` (or a full path to one) and
whose script imports torch or a framework on top of it (found by reading the script and the
local modules it imports, never by running it), or that starts with ``torchrun``,
``accelerate`` or ``deepspeed``, is checked first:

* the answer ``rgt audit`` recorded for that interpreter, when it says torch is there
  (``$RGT_HOME/audits/<machine>.python.json``);
* otherwise one quick probe over the machine's transport: the interpreter the job's PATH gives
  (for a launcher, the one its ``#!`` line names) is asked for torch's package spec and
  ``version.py``, without importing torch (tens of milliseconds plus one round trip).

No torch: ``GateRefused`` (exit 3) naming the interpreter, with the fix; ``--force`` starts
anyway. An interpreter the probe cannot find or a machine it cannot reach is not refused here
(the launch reports it).
"""

from __future__ import annotations

import ast
import json
import os
import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from rgt._fs import atomic_write_json
from rgt.config import rgt_home
from rgt.errors import GateRefused
from rgt.findings import Finding

LAUNCHERS = ("torchrun", "accelerate", "deepspeed")
PYTHON = re.compile(r"^python(\d+(\.\d+)?)?$")
TORCH_MODULES = frozenset(
    {"torch", "torchvision", "torchaudio", "lightning", "pytorch_lightning", "transformers",
     "accelerate", "deepspeed", "timm", "peft", "trl"}
)  # fmt: skip
MAX_SCANNED = 200  # local modules read to decide whether a script imports torch
# $1: the command's first word, $2: the probe. A launcher's interpreter is its #! line's.
RESOLVE = (
    'exe=$(command -v "$1") || { echo "{\\"missing\\": true}"; exit 0; }\n'
    'case "${1##*/}" in\n'
    '  python*) py="$exe" ;;\n'
    '  *) set -- $(head -n 1 "$exe" | sed "s/^#! *//"); py="$1"\n'
    '     if [ "${py##*/}" = env ]; then py=$(command -v "$2"); fi ;;\n'
    "esac\n"
    'exec "$py" -c "$PROBE"\n'
)


def finding(severity: str, check: str, text: str, fix: str = "") -> Finding:
    """An audit finding (``rgt.watch.audit.finding``)."""
    return Finding(check, severity, text, source="rgt audit", fix=fix)


def python_file(machine: str) -> Path:
    return rgt_home() / "audits" / f"{quote(machine, safe='')}.python.json"


def record(machine: str, interpreters: dict[str, Any]) -> None:
    """What `rgt audit` found about the interpreters jobs run, for the next `rgt run`."""
    found = {k: v for k, v in interpreters.items() if isinstance(v, dict) and "torch" in v}
    path = python_file(machine)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(str(path), {"recorded": time.time(), "interpreters": found})


def check(
    machine: str, command: Sequence[str], cwd: Path, env: dict[str, str], force: bool
) -> list[str]:
    """Notes for `rgt run`; raises ``GateRefused`` when the job's interpreter lacks torch."""
    first = os.path.basename(command[0]) if command else ""
    launcher = first in LAUNCHERS
    if not (launcher or (PYTHON.match(first) and needs_torch(command, cwd))):
        return []
    answer = _cached(machine, command[0]) if not launcher else None
    if not (answer or {}).get("installed"):
        answer = probe(machine, command[0], env)
    if answer is None or answer.get("installed") or answer.get("missing"):
        return []
    where = f"{answer.get('executable') or command[0]} (Python {answer.get('python') or '?'})"
    reason = f"`{command[0]}` on {machine} runs {where}, which has no torch"
    if force:
        return [f"--force: starting although {reason}"]
    raise GateRefused(
        f"{reason}: the job would fail with import_error",
        [reason],
        fix=f"install torch into it (`{answer.get('executable') or command[0]} -m pip install "
        f"torch`), or run the job with an interpreter that has torch (`rgt audit {machine}` "
        f"lists them: `rgt run {machine} -- /path/to/python train.py`), or start anyway "
        "with --force",
    )


def findings(r: dict[str, Any], name: str) -> list[Finding]:
    """The Python a job's ``python``/``python3`` runs (as the agent starts it: the
    non-interactive shell's PATH) and the profile's, each with its torch; a bug for one
    that has none, naming one that has it."""
    found = r.get("interpreters") or {}
    seen: dict[str, list[str]] = {}
    for key, label in (("python", "`python`"), ("python3", "`python3`"), ("expected", None)):
        reading = found.get(key)
        if reading and not reading.get("error") and "torch" in reading:
            seen.setdefault(reading["executable"], []).append(label or "the profile's python")
    with_torch = [e for e in seen if _torch_of(found, e).get("installed")]
    return [_python_finding(found, exe, labels, with_torch, name) for exe, labels in seen.items()]


def _torch_of(found: dict[str, Any], executable: str) -> dict[str, Any]:
    for reading in found.values():
        if isinstance(reading, dict) and reading.get("executable") == executable:
            return dict(reading.get("torch") or {})
    return {}


def _python_finding(
    found: dict[str, Any], exe: str, labels: list[str], with_torch: list[str], name: str
) -> Finding:
    torch = _torch_of(found, exe)
    python = torch.get("python") or "?"
    what = f"jobs' {' and '.join(labels)} run {exe} (Python {python})"
    if torch.get("installed"):
        build = f"CUDA {torch['cuda']} build" if torch.get("cuda") else "CPU-only build"
        return finding("info", "python", f"{what}: torch {torch.get('version')} ({build})")
    instead = f"`rgt run {name} -- {with_torch[0]} train.py`" if with_torch else None
    fix = f"install torch into it (`{exe} -m pip install torch`, the build for the driver's CUDA)"
    fix += f", or start torch jobs with the one that has it: {instead}" if instead else ""
    return finding("bug", "torch", f"{what}, which has no torch", fix)


def _cached(machine: str, word: str) -> dict[str, Any] | None:
    try:
        found = json.loads(python_file(machine).read_text())["interpreters"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    for name, reading in found.items():
        if word in (name, reading.get("path"), reading.get("executable")):
            return dict(reading["torch"], executable=reading.get("executable"))
    return None


def probe(machine: str, word: str, env: dict[str, str]) -> dict[str, Any] | None:
    """torch in the interpreter ``word`` resolves to on the machine, by one quick round trip;
    None when the machine could not answer."""
    from rgt.agent.probes.pyenv import TORCH_FIND
    from rgt.backends import backend_for
    from rgt.state.store import Store

    prefix = ["env", f"PATH={env['PATH']}"] if "PATH" in env else []
    argv = [*prefix, "env", f"PROBE={TORCH_FIND}", "sh", "-c", RESOLVE, "sh", word]
    try:
        result = backend_for(Store.open(), machine).transport.run(argv, timeout=60)
        lines = result.text().strip().splitlines()
        return dict(json.loads(lines[-1])) if result.ok and lines else None
    except Exception:  # a machine that cannot answer is not refused here: the launch reports it
        return None


def needs_torch(command: Sequence[str], cwd: Path) -> bool:
    """Does the Python command import torch (or a framework on top of it)? ``-c CODE``,
    ``-m MODULE`` and ``SCRIPT`` are read, with the local modules they import."""
    words = list(command[1:])
    while words and words[0].startswith("-") and words[0] not in ("-c", "-m"):
        words.pop(0)  # -u, -O, -X …: no argument of their own in the common cases
    if len(words) >= 2 and words[0] == "-c":
        return _imports_torch([ast_of(words[1])], cwd)
    if len(words) >= 2 and words[0] == "-m":
        return words[1].split(".")[0] in TORCH_MODULES or _imports_torch(
            [_module_tree(cwd, words[1])], cwd
        )
    script = cwd / words[0] if words else cwd
    return bool(words) and _imports_torch([_file_tree(script)], script.parent)  # its sys.path[0]


def _imports_torch(trees: list[ast.AST | None], cwd: Path) -> bool:
    seen: set[str] = set()
    while trees and len(seen) < MAX_SCANNED:
        tree = trees.pop()
        for name in _imported(tree):
            top = name.split(".")[0]
            if top in TORCH_MODULES:
                return True
            if name not in seen:
                seen.add(name)
                trees.append(_module_tree(cwd, name))
    return False


def _imported(tree: ast.AST | None) -> list[str]:
    names: list[str] = []
    for node in ast.walk(tree) if tree is not None else ():
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.append(node.module)
    return names


def _module_tree(cwd: Path, name: str) -> ast.AST | None:
    base = cwd.joinpath(*name.split("."))
    return _file_tree(base.with_suffix(".py")) or _file_tree(base / "__init__.py")


def _file_tree(path: Path) -> ast.AST | None:
    try:
        return ast_of(path.read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return None


def ast_of(source: str) -> ast.AST | None:
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError):
        return None
