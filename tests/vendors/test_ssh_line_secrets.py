"""A secret inside an `--ssh` line (a token in a ProxyCommand, user:pass@) is refused with the
fix before anything is stored: rgt keeps the line's options in state.db and logs ssh argv.
ssh's own option names (PasswordAuthentication=no) and $VARIABLE references pass."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from rgt.errors import UsageError
from rgt.transport._ssh_line import parse_ssh_line
from tests import clirun

TOKEN = "tok_PLANTED_51f0c9a8"
REFUSED = [
    f'ssh -o "ProxyCommand=websocat wss://relay.example/?token={TOKEN} %h" root@h',
    f'ssh -o ProxyCommand="corkscrew --auth-token {TOKEN} %h %p" root@h',
    f"ssh -o 'ProxyCommand=tool --password \"{TOKEN}\"' root@h",
    f'ssh -o "ProxyCommand=curl -s https://me:{TOKEN}@relay.example/ %h" root@h',
    f"ssh me:{TOKEN}@h",
    f"ssh -J bob:{TOKEN}@jump root@h",
    f"ssh -J a@j1,bob:{TOKEN}@j2 root@h",
    f"ssh://me:{TOKEN}@h:2222",
]
ACCEPTED = [
    "ssh -p 22 -o PasswordAuthentication=no -o PreferredAuthentications=publickey root@h",
    'ssh -o "ProxyCommand=cloudflared access ssh --hostname %h --token $CF_TOKEN" root@h',
    "ssh -o \"ProxyCommand=tool --password '$PW'\" root@h",
    'ssh -o "ProxyCommand=ssh -W %h:%p user@bastion" root@h',
    'ssh -o ProxyCommand="nc -X connect -x proxy:8080 %h %p" root@h',
    "ssh -J a@j1:22,b@j2 root@h",
    "ssh root@[::1]",
]


@pytest.mark.parametrize("line", REFUSED)
def test_a_secret_in_the_line_is_refused_with_the_fix(line: str) -> None:
    with pytest.raises(UsageError) as refused:
        parse_ssh_line(line)
    assert TOKEN not in refused.value.message and "$NAME" in str(refused.value.fix)


@pytest.mark.parametrize("line", ACCEPTED)
def test_ssh_option_names_and_variable_references_pass(line: str) -> None:
    assert parse_ssh_line(line)["host"]


def test_up_refuses_it_and_stores_nothing() -> None:
    proc = clirun.rgt("up", "generic-ssh", "--name", "box", "--ssh", REFUSED[0], "--json")
    assert proc.returncode == 2, proc.stderr
    assert "looks like a secret" in json.loads(proc.stdout)["message"]
    assert TOKEN not in proc.stdout + proc.stderr
    home = Path(os.environ["RGT_HOME"])
    for path in home.rglob("*"):
        assert not path.is_file() or TOKEN.encode() not in path.read_bytes(), path
