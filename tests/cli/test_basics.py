"""The CLI's contract: light imports, --json documents, exit codes, errors that name the fix."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.clirun import rgt

HEAVY = ("torch", "numpy", "scipy", "matplotlib", "httpx", "pandas", "jinja2", "PIL")
HEAVY += ("starlette", "uvicorn")  # `rgt ui` imports them only inside rgt.ui


def _modules_after(*args: str) -> tuple[set[str], str]:
    """The modules a fresh interpreter holds after ``rgt ARGS…``, and what it printed."""
    code = (
        "import sys\nfrom rgt.cli import cli\n"
        f"try:\n    cli.main({list(args)!r}, standalone_mode=False)\nexcept SystemExit:\n    pass\n"
        "import json\nprint(json.dumps(sorted(sys.modules)))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(json.loads(proc.stdout.splitlines()[-1])), proc.stdout


def test_help_imports_nothing_heavy() -> None:
    loaded, printed = _modules_after("--help")
    assert not loaded & set(HEAVY), loaded & set(HEAVY)
    assert "Usage" in printed


def test_lint_loads_no_logging_or_state_code(tmp_path: Path) -> None:
    """``rgt lint`` starts in well under a second: the debug log (``logging``), the state
    store and the transports are loaded only by the commands that use them, and the cache's
    code (and its hashing) only when the cache is used."""
    (tmp_path / "train.py").write_text("import torch\n")
    loaded, printed = _modules_after("lint", "--json", "--no-cache", str(tmp_path))
    assert '"files": 1' in printed
    unwanted = {"logging", "traceback", "rgt._log", "rgt.state", "rgt.transport"}
    assert not loaded & {*unwanted, "hashlib", "rgt.lint._cache"}
    loaded, printed = _modules_after("lint", "--json", str(tmp_path))
    assert not loaded & unwanted and "rgt.lint._cache" in loaded


def test_the_command_map_names_what_each_module_registers() -> None:
    """``rgt.cli.COMMANDS`` (which module a command's call imports) is exactly what the
    modules' ``register`` functions add."""
    import importlib

    import click

    from rgt.cli import COMMAND_MODULES, COMMANDS

    found: dict[str, str] = {}
    for module in COMMAND_MODULES:
        group = click.Group()
        importlib.import_module(module).register(group)
        assert not set(group.commands) & set(found), f"{module} registers a name twice"
        found.update(dict.fromkeys(group.commands, module))
    assert found == COMMANDS


def test_a_command_loads_only_its_own_module() -> None:
    loaded, _printed = _modules_after("lint", "--help")
    assert "rgt.cli.lint" in loaded
    assert not loaded & {"rgt.cli.vendors", "rgt.cli.jobs", "rgt.cli.ui", "rgt.cli.mcp"}


def test_every_command_has_json_flag() -> None:
    from rgt.cli import load_all

    no_json = {"logs"}  # a log is raw bytes; there is nothing to wrap in a document
    no_json.add("mcp")  # its stdout is the MCP protocol (JSON-RPC), one message per line
    for name, command in load_all().commands.items():
        if name in no_json:
            continue
        params = _all_params(command)
        assert "json_mode" in params, f"`rgt {name}` lacks --json"


def _all_params(command: object) -> set[str]:
    import click

    if isinstance(command, click.Group):
        names: set[str] = set()
        for sub in command.commands.values():
            names |= _all_params(sub)
        return names
    assert isinstance(command, click.Command)
    return {p.name for p in command.params if p.name}


def test_unknown_machine_is_usage_error_with_fix() -> None:
    proc = rgt("run", "nosuch", "--json", "--", "python", "x.py")
    assert proc.returncode == 2
    doc = json.loads(proc.stdout)
    assert doc["error"] == "UnknownMachineError" and doc["exit_code"] == 2
    assert "rgt up" in doc["fix"]
    assert "fix:" in proc.stderr


def test_missing_command_is_usage_error() -> None:
    proc = rgt("run", "box")
    assert proc.returncode == 2
    assert "Missing argument" in proc.stderr


@pytest.mark.slow
def test_bad_machine_name_changes_nothing(rgt_home: Path) -> None:
    proc = rgt("up", "local", "--name", "bad name/../x", "--json")
    assert proc.returncode == 2
    assert json.loads(proc.stdout)["error"] == "UsageError"
    assert rgt("status", "--json").returncode == 0
    assert json.loads(rgt("status", "--json").stdout)["machines"] == []


def test_up_local_and_status_json(tmp_path: Path, hostile_name: str) -> None:
    root = tmp_path / hostile_name / "durable"
    proc = rgt("up", "local", "--name", "box", "--root", str(root), "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["machine"] == "box" and Path(doc["durable_root"]) == root.resolve()
    status = json.loads(rgt("status", "--json").stdout)
    assert [m["name"] for m in status["machines"]] == ["box"]
    assert status["jobs"] == []


def test_debug_env_shows_traceback() -> None:
    env = {**os.environ, "RGT_DEBUG": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "rgt.cli", "status", "nosuch"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "Traceback" in proc.stderr


@pytest.mark.parametrize("flag", ["--version", "--help"])
def test_top_level_flags(flag: str) -> None:
    proc = rgt(flag)
    assert proc.returncode == 0
    assert proc.stdout


@pytest.mark.slow
def test_bad_env_pair_changes_nothing(tmp_path: Path) -> None:
    assert rgt("up", "local", "--name", "box", "--root", str(tmp_path / "r")).returncode == 0
    proc = rgt("run", "box", "--env", "NOEQUALS", "--json", "--", "python", "x.py", cwd=tmp_path)
    assert proc.returncode == 2
    assert "NAME=VALUE" in json.loads(proc.stdout)["message"]
    assert json.loads(rgt("status", "--json").stdout)["jobs"] == []
    assert not (tmp_path / "r" / ".rgt" / "jobs").exists()


@pytest.mark.slow
def test_missing_secret_changes_nothing(tmp_path: Path) -> None:
    assert rgt("up", "local", "--name", "box", "--root", str(tmp_path / "r")).returncode == 0
    proc = rgt(
        "run",
        "box",
        "--secret",
        "RGT_TEST_UNSET_TOKEN",
        "--json",
        "--",
        "python",
        "x.py",
        cwd=tmp_path,
    )
    assert proc.returncode == 2
    assert "not set" in json.loads(proc.stdout)["message"]
    assert json.loads(rgt("status", "--json").stdout)["jobs"] == []


@pytest.mark.parametrize(
    "change,field",
    [
        ({"schema": "rgt.spec/0"}, "schema"),
        ({"colour": "blue"}, "colour"),
        ({"command": []}, "command"),
        ({"job_id": "../escape"}, "job_id"),
        ({"retry": {"max_retries": -1}}, "retry"),
    ],
)
def test_malformed_job_spec_names_the_field(change: dict[str, object], field: str) -> None:
    from rgt.errors import SpecError
    from rgt.models import JobSpec

    good = JobSpec(job_id="j1", machine="box", command=("python", "t.py")).to_json()
    with pytest.raises(SpecError) as err:
        JobSpec.from_json({**good, **change}, path="spec.json")
    assert err.value.field == field
    assert err.value.exit_code == 2


def test_an_env_option_without_a_value_is_a_usage_error() -> None:
    proc = rgt("run", "box", "--env", "NOVALUE", "--json", "--", "python", "x.py")
    assert proc.returncode == 2
    assert json.loads(proc.stdout)["message"] == "--env 'NOVALUE' is not NAME=VALUE"
