"""`rgt --help` and the deliver CLI must not import the heavy libraries they use lazily."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("jinja2", "matplotlib", "PIL", "numpy", "torch", "scipy")


def test_deliver_help_imports_nothing_heavy() -> None:
    code = (
        "import sys\nfrom rgt.cli import cli\n"
        "try:\n    cli.main(['deliver', '--help'], standalone_mode=False)\n"
        "except SystemExit:\n    pass\n"
        "import rgt.deliver.reconcile, rgt.deliver.gate, rgt.deliver.repro\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "[]"
