"""The shipped SKILL.md: every `rgt …` command in it exists in the real CLI with every flag it
uses; `rgt skill install` writes it where each of the four hosts reads it; `rgt --help` never
imports the MCP SDK."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import click
import pytest

from rgt.cli import load_all
from rgt.mcp.skill import BEGIN, END, body, install, skill_text, with_block
from tests import clirun

SPAN = re.compile(r"`(rgt [^`]+)`")


def skill_commands() -> list[str]:
    return SPAN.findall(skill_text())


def resolve(words: list[str]) -> tuple[click.Command, list[str]]:
    """The click command ``rgt WORDS…`` names, and the words after it."""
    command: click.Command = load_all()
    rest = list(words)
    while isinstance(command, click.Group) and rest and rest[0] in command.commands:
        command = command.commands[rest.pop(0)]
    return command, rest


def flags_of(command: click.Command) -> dict[str, bool]:
    """Every option's spellings → whether it takes a value."""
    found = {"-h": False, "--help": False}
    for param in command.params:
        if isinstance(param, click.Option):
            takes = not (param.is_flag or param.count)
            found.update({name: takes for name in param.opts + param.secondary_opts})
    return found


def test_the_skill_teaches_the_whole_workflow_in_few_words() -> None:
    commands = skill_commands()
    assert len(commands) >= 20
    verbs = {" ".join(shlex.split(c)[1:3]) for c in commands}
    for needed in ("smoke --json", "watch JOB", "triage JOB", "pull JOB", "verify compare"):
        assert any(v.startswith(needed.split()[0]) for v in verbs), needed
    assert "approval_required" in skill_text() and "rgt approve" in skill_text()
    assert len(skill_text().split()) < 1200  # far fewer words than a hand-written runbook


@pytest.mark.parametrize("line", skill_commands())
def test_every_command_and_flag_in_the_skill_exists(line: str) -> None:
    words = shlex.split(line)[1:]
    command, rest = resolve(words)
    assert not isinstance(command, click.Group), f"{line!r}: no such command"
    known = flags_of(command)
    words = iter(rest)
    for word in words:
        if word == "--":
            break  # the job's own command and its options
        if word.startswith("-") and word != "-":
            name, has_value = word.split("=", 1)[0], "=" in word
            assert name in known, f"{line!r}: {word} is not an option"
            if known[name] and not has_value:
                assert next(words, None) is not None, f"{line!r}: {name} needs a value"


def test_install_writes_where_each_host_reads(tmp_path: Path) -> None:
    home, project = tmp_path / "home", tmp_path / "project"
    paths = {
        ("claude", False): home / ".claude/skills/rgt/SKILL.md",
        ("claude", True): project / ".claude/skills/rgt/SKILL.md",
        ("codex", False): home / ".codex/AGENTS.md",
        ("codex", True): project / "AGENTS.md",
        ("gemini", False): home / ".gemini/GEMINI.md",
        ("gemini", True): project / "GEMINI.md",
        ("cursor", True): project / ".cursor/rules/rgt.mdc",
    }
    for (host, in_project), expected in paths.items():
        done = install(host, in_project, home=home, cwd=project)
        assert done.path == expected and expected.is_file()
    assert paths[("claude", False)].read_text() == skill_text()
    rule = paths[("cursor", True)].read_text()
    assert rule.startswith("---\ndescription: ") and "alwaysApply: false" in rule
    assert rule.endswith(body())


def test_a_users_agents_md_keeps_its_text_and_gets_one_block(tmp_path: Path) -> None:
    agents = tmp_path / "AGENTS.md"
    agents.write_text("# My project\n\nUse uv.\n")
    install("codex", True, cwd=tmp_path)
    install("codex", True, cwd=tmp_path)  # again: replaced, never duplicated
    text = agents.read_text()
    assert text.startswith("# My project\n\nUse uv.\n")
    assert text.count(BEGIN) == text.count(END) == 1 and body().strip() in text
    assert with_block(text, "new") == "# My project\n\nUse uv.\n\n" + f"{BEGIN}\nnew\n{END}\n"


def test_cursor_without_project_is_refused_with_the_fix(tmp_path: Path) -> None:
    proc = rgt(tmp_path, "skill", "install", "--for", "cursor", "--json")
    assert proc.returncode == 2
    assert "--project" in json.loads(proc.stdout)["fix"]


def test_skill_show_and_install_on_the_command_line(tmp_path: Path) -> None:
    assert rgt(tmp_path, "skill", "show").stdout == skill_text()
    proc = rgt(tmp_path, "skill", "install", "--for", "gemini", "--project", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["path"] == str(tmp_path / "GEMINI.md")


def test_rgt_help_does_not_import_the_mcp_sdk() -> None:
    code = "import sys, rgt.cli; print(any(m.split('.')[0] == 'mcp' for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "False", out.stderr


def rgt(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return clirun.rgt(*args, cwd=cwd, timeout=60)
