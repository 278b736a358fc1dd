"""ssh-line patterns: the exact lines platform consoles show are accepted, wrong ones are not."""

from __future__ import annotations

import pytest

from rgt.profiles import list_profiles, load_profile

# Real console shapes (platform-facts.md sections 4-10; C:adl-ssh, C:vast-ssh, D:rp-ssh).
ACCEPTED = [
    (
        "autodl",
        "ssh -p 12345 root@region-9.autodl.com",
        {"port": "12345", "user": "root", "host": "region-9.autodl.com"},
    ),
    (
        "autodl",
        "ssh -p 38076 root@connect.westb.seetacloud.com",
        {"port": "38076", "user": "root", "host": "connect.westb.seetacloud.com"},
    ),
    (
        "autodl",
        "  ssh  -p 38076   root@connect.nmb1.seetacloud.com ",
        {"port": "38076", "user": "root", "host": "connect.nmb1.seetacloud.com"},
    ),
    (
        "vastai",
        "ssh -p 12345 root@ssh4.vast.ai -L 8080:localhost:8080",
        {"port": "12345", "user": "root", "host": "ssh4.vast.ai"},
    ),
    (
        "vastai",
        "ssh -p 41234 root@203.0.113.7 -L 8080:localhost:8080",
        {"port": "41234", "user": "root", "host": "203.0.113.7"},
    ),
    (
        "runpod",
        "ssh root@213.173.108.12 -p 17445 -i ~/.ssh/id_ed25519",
        {"port": "17445", "user": "root", "host": "213.173.108.12"},
    ),
    ("lambda", "ssh ubuntu@198.51.100.23", {"user": "ubuntu", "host": "198.51.100.23"}),
    (
        "gpushare",
        "ssh -p 34567 root@i-1.gpushare.com",
        {"port": "34567", "user": "root", "host": "i-1.gpushare.com"},
    ),
    (
        "matpool",
        "ssh -p 26000 root@hz.matpool.com",
        {"port": "26000", "user": "root", "host": "hz.matpool.com"},
    ),
    (
        "lanrui",
        "ssh user@ssh.cn-bj.lanrui-ai.com -p 30022 -i ~/.ssh/id_rsa",
        {"port": "30022", "user": "user", "host": "ssh.cn-bj.lanrui-ai.com"},
    ),
    (
        "generic-ssh",
        "ssh -p 2222 -i /tmp/k root@127.0.0.1",
        {"port": "2222", "user": "root", "host": "127.0.0.1"},
    ),
    (
        "generic-ssh",
        "ssh -p2222 alice@box.example.org",
        {"port": "2222", "user": "alice", "host": "box.example.org"},
    ),
    ("generic-ssh", "mybox", {"host": "mybox"}),
    ("generic-ssh", "ssh gpu-box", {"host": "gpu-box"}),
]

REJECTED = [
    ("autodl", "ssh root@region-9.autodl.com"),  # no port: AutoDL always gives one
    ("autodl", "ssh -p 12345 root@region-9.autodl.com.evil.org"),
    ("autodl", "ssh -p 12345 root@ssh4.vast.ai"),
    ("vastai", "ssh -p 12345 root@ssh4.vast.ai.example.com"),
    ("runpod", "ssh 4sb0xzpbtm7k-644112be@ssh.runpod.io -i ~/.ssh/id_ed25519"),  # no rsync
    ("lambda", "ssh root@198.51.100.23"),  # Lambda's user is ubuntu
    ("generic-ssh", "scp -P 22 root@host:/x ."),
    ("generic-ssh", "ssh -p 22 root@host; rm -rf ~"),
]


@pytest.mark.parametrize(("name", "line", "groups"), ACCEPTED)
def test_console_lines_are_accepted(name: str, line: str, groups: dict[str, str]) -> None:
    assert load_profile(name).match_ssh(line) == groups


@pytest.mark.parametrize(("name", "line"), REJECTED)
def test_wrong_lines_are_rejected(name: str, line: str) -> None:
    assert load_profile(name).match_ssh(line) is None


def test_every_flavour_example_agrees_with_its_patterns() -> None:
    """A flavour rgt can rsync over must be accepted; one it cannot must be refused."""
    checked = 0
    for profile in list_profiles():
        for flavour in profile.raw["network"]["ssh"].get("flavours", []):
            matched = profile.match_ssh(flavour["example"]) is not None
            assert matched == flavour["rsync"], (profile.name, flavour)
            checked += 1
    assert checked >= 15


def test_profiles_without_ssh_accept_no_line() -> None:
    for name in ("local", "kubernetes", "colab", "kaggle"):
        assert load_profile(name).match_ssh("ssh -p 22 root@127.0.0.1") is None
