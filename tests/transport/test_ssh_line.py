"""Parsing the ssh line a platform console shows (``rgt up … --ssh LINE``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rgt.errors import UsageError
from rgt.transport._ssh_line import parse_ssh_line


@pytest.mark.parametrize(
    ("line", "host", "port", "user"),
    [
        ("ssh -p 12345 root@region-1.autodl.com", "region-1.autodl.com", 12345, "root"),
        (
            "ssh -p 23456 root@connect.westb.seetacloud.com",
            "connect.westb.seetacloud.com",
            23456,
            "root",
        ),
        ("ssh -p 40022 root@ssh4.vast.ai -L 8080:localhost:8080", "ssh4.vast.ai", 40022, "root"),
        ("ssh root@213.173.108.7 -p 17445 -i ~/.ssh/id_ed25519", "213.173.108.7", 17445, "root"),
        ("ssh://ubuntu@10.0.0.5:2200", "10.0.0.5", 2200, "ubuntu"),
        ("mybox", "mybox", None, None),
        ("ssh -p2222 -l alice host.example", "host.example", 2222, "alice"),
        ("ssh -6 root@[fe80::1]", "fe80::1", None, "root"),
    ],
)
def test_console_lines(line: str, host: str, port: int | None, user: str | None) -> None:
    parsed = parse_ssh_line(line)
    assert (parsed["host"], parsed.get("port"), parsed.get("user")) == (host, port, user)


def test_identity_is_made_absolute_and_options_kept() -> None:
    parsed = parse_ssh_line("ssh -i ~/k.pem -J jump@bastion -o Compression=yes -C root@h")
    assert parsed["identity_file"] == str(Path("~/k.pem").expanduser().resolve())
    assert parsed["ssh_options"] == ["ProxyJump=jump@bastion", "Compression=yes", "Compression=yes"]


@pytest.mark.parametrize(
    ("line", "words"),
    [
        ("ssh -p 22 root@h nvidia-smi -L", "remote command ('nvidia-smi -L')"),
        ("ssh -p abc root@h", "bad ssh port"),
        ("ssh -p 70000 root@h", "bad ssh port"),
        ("ssh -W host:22 root@h", "does not understand ssh flag '-W'"),
        ("ssh -F cfg root@h", "-F CONFIG"),
        ("ssh -p", "needs a value"),
        ("ssh 'unclosed", "cannot parse"),
        ("ssh", "one destination"),
    ],
)
def test_bad_lines_name_the_problem(line: str, words: str) -> None:
    with pytest.raises(UsageError) as info:
        parse_ssh_line(line)
    assert words in info.value.message
    assert info.value.fix
