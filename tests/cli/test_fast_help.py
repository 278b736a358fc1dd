"""``rgt --help``, ``-h``, ``--version`` and ``rgt`` alone answer without importing click, and
print exactly what click prints: the same bytes on the same stream with the same exit code.

Each case runs the real CLI (``python -m rgt.cli``, which ``rgt.cli.main`` serves as the console
script does) beside the click application itself (``rgt.cli.app.run``, what every other call
runs), in fresh interpreters with the same environment.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import struct
import subprocess
import sys
import termios

import pytest

REGENERATE = "the copy in src/rgt/cli/_help.py is stale: run .venv/bin/python tools/render_help.py"
CLICK = "import sys\nfrom rgt.cli.app import run\nrun(sys.argv[1:])"
INVOCATIONS = ([], ["--help"], ["-h"], ["--version"])


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "RGT_DEBUG")}
    return {**env, "PYTHONIOENCODING": "utf-8", **extra}


def _both(args: list[str], env: dict[str, str]) -> tuple[tuple[object, ...], tuple[object, ...]]:
    """(exit code, stdout, stderr) of the real CLI and of the click application."""
    runs = []
    for argv in ([sys.executable, "-m", "rgt.cli"], [sys.executable, "-c", CLICK]):
        proc = subprocess.run([*argv, *args], capture_output=True, env=env, timeout=60)
        runs.append((proc.returncode, proc.stdout, proc.stderr))
    return runs[0], runs[1]


@pytest.mark.parametrize("args", INVOCATIONS, ids=lambda a: " ".join(a) or "no-args")
def test_the_copy_is_what_click_prints_at_80_columns(args: list[str]) -> None:
    real, click = _both(args, _env(COLUMNS="80"))
    assert real == click, REGENERATE
    assert real[0] == (2 if not args else 0)


@pytest.mark.parametrize("columns", ["200", "79", "60", "0", "wide"])
def test_other_widths_print_what_click_prints(columns: str) -> None:
    """Wider than 80 wraps as at 80; narrower (where the copy would be wrong) goes to click;
    a COLUMNS that is not a positive number is ignored, as shutil ignores it."""
    real, click = _both(["--help"], _env(COLUMNS=columns))
    assert real == click
    if columns == "60":
        assert max(len(line) for line in real[1].decode().splitlines()) <= 58


@pytest.mark.parametrize("args", [[], ["--version"]], ids=["no-args", "--version"])
def test_a_narrow_terminal_prints_what_click_prints(args: list[str]) -> None:
    real, click = _both(args, _env(COLUMNS="60"))
    assert real == click


@pytest.mark.parametrize(
    "extra",
    [{"PYTHONIOENCODING": "latin-1"}, {"_RGT_COMPLETE": "bash_source"}, {"RGT_DEBUG": "1"}],
    ids=["latin-1", "completion", "debug"],
)
def test_what_click_answers_differently_goes_to_click(extra: dict[str, str]) -> None:
    real, click = _both(["--help"], _env(COLUMNS="80", **extra))
    assert real == click


@pytest.mark.parametrize("columns", [60, 120])
def test_a_terminal_s_width_decides_like_click(columns: int) -> None:
    """Without COLUMNS, click wraps at the width of the terminal stdout is on."""
    assert _on_terminal(["-m", "rgt.cli"], columns) == _on_terminal(["-c", CLICK], columns)


def _on_terminal(argv: list[str], columns: int) -> bytes:
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    cmd = [sys.executable, *argv, "--help"]
    with subprocess.Popen(cmd, stdout=follower, stderr=subprocess.PIPE, env=_env()) as proc:
        os.close(follower)
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            chunks.append(chunk)
        assert proc.wait(timeout=60) == 0
    os.close(leader)
    return b"".join(chunks)


@pytest.mark.parametrize("args", [["--help"], ["--version"]])
def test_the_answer_imports_no_click(args: list[str]) -> None:
    """Beyond a bare interpreter, only rgt, rgt.cli and the copy are loaded."""
    code = (
        "import sys, atexit, json\nbare = set(sys.modules)\n"
        "atexit.register(lambda: sys.stderr.write(json.dumps(sorted(set(sys.modules) - bare))))\n"
        f"from rgt.cli import main\nmain({args!r})"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, env=_env(), text=True)
    assert proc.returncode == 0 and proc.stdout
    loaded = set(json.loads(proc.stderr)) - {"__future__"}
    assert loaded <= {"rgt", "rgt.cli", "rgt.cli._help"}, loaded


def test_the_old_names_of_rgt_cli_still_import() -> None:
    import rgt.cli
    from rgt.cli import COMMANDS, app, cli, load_all

    assert cli is app.cli and load_all is app.load_all and COMMANDS is app.COMMANDS
    with pytest.raises(ImportError):
        from rgt.cli import no_such_name  # noqa: F401
    assert not hasattr(rgt.cli, "no_such_name")
