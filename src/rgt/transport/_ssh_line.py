"""The ssh line a platform's console shows (``ssh -p 31234 root@region-1.autodl.com``), parsed
into what ``SshTarget`` needs: host, port, user, identity file, jump host and the ``-o`` options
that matter outside an interactive session. Flags for interactive use only (port forwards,
agent forwarding, verbosity) are dropped; a line carrying a password or token is refused (it
would be stored with the machine).
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

from rgt.errors import UsageError

# Flags of a pasted ssh line that rgt carries over; the rest (port forwards, agent forwarding,
# verbosity) make sense for an interactive session only and are dropped.
_VALUE_FLAGS = {
    "-p": "port",
    "-i": "identity_file",
    "-l": "user",
    "-o": "option",
    "-J": "jump",
    "-L": None,
    "-R": None,
    "-D": None,
    "-F": "config",
    "-c": "cipher",
}
_BARE_FLAGS = {
    "-4": "AddressFamily=inet",
    "-6": "AddressFamily=inet6",
    "-C": "Compression=yes",
    "-A": None,
    "-X": None,
    "-Y": None,
    "-t": None,
    "-T": None,
    "-N": None,
    "-q": None,
    "-v": None,
    "-vv": None,
    "-vvv": None,
}


def parse_ssh_line(line: str) -> dict[str, Any]:
    """``ssh -p 12345 -i KEY root@region-1.autodl.com`` → host, port, user, identity_file,
    ssh_options. Accepts ``ssh://user@host:port`` and a bare ``~/.ssh/config`` alias."""
    try:
        words = shlex.split(line.strip())
    except ValueError as exc:
        raise UsageError(f"cannot parse the ssh line: {exc}", fix=_LINE_FIX) from exc
    if words and words[0] in ("ssh", "/usr/bin/ssh"):
        words = words[1:]
    found: dict[str, Any] = {"ssh_options": []}
    hosts = _consume_flags(words, found)
    if len(hosts) != 1:
        raise UsageError(
            f"expected one destination in the ssh line, found {hosts or 'none'}", fix=_LINE_FIX
        )
    found.update(_split_destination(hosts[0], found))
    _refuse_secrets(found)
    return found


_LINE_FIX = (
    "paste the line the platform console shows, e.g. "
    '`--ssh "ssh -p 12345 root@region-1.autodl.com"`, with no remote command'
)

# A secret written into the line (ProxyCommand=... --token abc, user:pass@host) would be kept in
# the state store and logged with every ssh command: refused; a $VARIABLE reference is fine.
_SECRET = re.compile(
    r"(?i)(?<![a-z])(token|secret|passw(or)?d|api[-_]?key|access[-_]?key|auth)[\w-]*"
    r"[\s=:]+['\"]?[^\s$'\"]|(^|[\s,/])[^\s,/@:]+:[^\s,/@]*@"
)


def _refuse_secrets(found: dict[str, Any]) -> None:
    values = [v for o in found["ssh_options"] for v in re.split(r"[=\s]", o, maxsplit=1)[1:]]
    if any(_SECRET.search(v) for v in values) or ":" in (found.get("user") or ""):
        raise UsageError(
            "the ssh line carries what looks like a secret (a token, a password, user:pass@)",
            fix="rgt stores the ssh line's options: put the secret in an environment variable "
            "and write $NAME in its place, or move the option to ~/.ssh/config (rgt honours it)",
        )


def _consume_flags(words: list[str], found: dict[str, Any]) -> list[str]:
    hosts: list[str] = []
    rest = iter(words)
    for word in rest:
        flag, attached = (word[:2], word[2:]) if word[:2] in _VALUE_FLAGS else (word, "")
        if flag in _VALUE_FLAGS:
            value = attached or next(rest, None)
            if value is None:
                raise UsageError(f"ssh flag {flag} needs a value", fix=_LINE_FIX)
            _take_value(_VALUE_FLAGS[flag], value, found)
        elif word in _BARE_FLAGS:
            if _BARE_FLAGS[word]:
                found["ssh_options"].append(_BARE_FLAGS[word])
        elif word.startswith("-"):
            allowed = " ".join(sorted({*_VALUE_FLAGS, *_BARE_FLAGS}))
            raise UsageError(
                f"rgt does not understand ssh flag {word!r}",
                fix=f"flags rgt accepts: {allowed}; put other settings in "
                "~/.ssh/config (rgt honours it)",
            )
        elif hosts:
            command = " ".join([word, *rest])
            raise UsageError(
                f"the ssh line ends with a remote command ({command!r})", fix=_LINE_FIX
            )
        else:
            hosts.append(word)
    return hosts


def _take_value(kind: str | None, value: str, found: dict[str, Any]) -> None:
    if kind == "port":
        found["port"] = _port(value)
    elif kind == "identity_file":
        found["identity_file"] = str(Path(value).expanduser().resolve())
    elif kind == "user":
        found["user"] = value
    elif kind == "option":
        found["ssh_options"].append(value)
    elif kind == "jump":
        found["ssh_options"].append(f"ProxyJump={value}")
    elif kind == "config":
        raise UsageError(
            "`-F CONFIG` is not supported in the ssh line",
            fix="put the settings in ~/.ssh/config or pass them with -o",
        )
    elif kind == "cipher":
        found["ssh_options"].append(f"Ciphers={value}")


def _port(text: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise UsageError(f"bad ssh port {text!r}", fix="the port is a number from 1 to 65535")
    return int(text)


def _split_destination(dest: str, found: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if dest.startswith("ssh://"):
        dest = dest[len("ssh://") :].rstrip("/")
        if dest.count(":") == 1 and not dest.endswith("]"):
            dest, port = dest.rsplit(":", 1)
            out["port"] = _port(port)
    if "@" in dest:
        user, dest = dest.rsplit("@", 1)
        out["user"] = found.get("user") or user
    out["host"] = dest.strip("[]")
    if not out["host"]:
        raise UsageError("the ssh line has no host", fix=_LINE_FIX)
    return out
