"""``%load_ext rgt.notebook``: the ``%rgt`` line magic in Colab and Kaggle notebooks.

    %load_ext rgt.notebook
    %rgt up colab --name colab1
    %rgt run colab1 -- python train.py
    %rgt watch --once

Each line runs the rgt CLI in the notebook's own process (``run_line``), exactly as ``!rgt …``
would in a shell, without starting a new interpreter per command. Importing this module imports
nothing from IPython: the shell hands itself to ``load_ipython_extension``.
"""

from __future__ import annotations

import shlex
import sys
from typing import Any


def run_line(line: str) -> int:
    """Run one rgt command line; its exit code (0 ok, 1 failed, 2 usage, 3 refused)."""
    from rgt.cli import main

    try:
        main(shlex.split(line))
    except SystemExit as exc:
        return _code(exc.code)
    return 0


def _code(code: object) -> int:
    if code is None:
        return 0
    return code if isinstance(code, int) else 1


def rgt_magic(line: str) -> None:
    """The ``%rgt`` magic: a failing command says its exit code under its own output."""
    code = run_line(line)
    if code:
        print(f"rgt exited with {code}", file=sys.stderr)


def load_ipython_extension(ipython: Any) -> None:
    """Called by ``%load_ext rgt.notebook``."""
    ipython.register_magic_function(rgt_magic, magic_kind="line", magic_name="rgt")
