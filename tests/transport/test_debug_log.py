"""`RGT_DEBUG=1` / `rgt -v`: every ssh and rsync command on stderr with its duration, through
`logging`, secrets redacted, stdout still one JSON document. Real CLI, real sshd."""

from __future__ import annotations

import json
import logging
import re
import secrets
import subprocess
from pathlib import Path

import pytest

from rgt._log import MASK, CommandLog, redact_argv, register_secrets
from tests import clirun
from tests.sshd import SshServer

LINE = re.compile(
    r"^rgt \S+ \S+ rgt\.transport\.(ssh|rsync): (ssh|rsync) (\d+\.\d{3}) s exit (\d+): "
)


def _rgt(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return clirun.rgt(*args, cwd=cwd, env=env, timeout=180)


def _up(
    server: SshServer, tmp_path: Path, env: dict[str, str], extra: str = ""
) -> subprocess.CompletedProcess[str]:
    line = f"{server.ssh_line}{extra}"
    root = str(tmp_path / "root")
    return _rgt("up", "generic-ssh", "--name", "box", "--ssh", line, "--root", root,
                "--json", cwd=tmp_path, env=env)  # fmt: skip


def _logged(proc: subprocess.CompletedProcess[str]) -> list[re.Match[str]]:
    assert proc.returncode == 0, proc.stderr[-3000:]
    json.loads(proc.stdout)  # stdout holds the one document, no log line
    return [m for line in proc.stderr.splitlines() if (m := LINE.match(line))]


@pytest.mark.slow  # four CLI calls over ssh: ~15 s, more on a busy machine
def test_cli_logs_ssh_and_rsync_argv_without_the_secret(
    sshd_server: SshServer, tmp_path: Path
) -> None:
    planted = "s3cr3t-" + secrets.token_hex(8)
    env = {"MY_SERVICE_CRED": planted}
    # A token inside the ssh line would be stored and in every ssh argv: refused, never logged.
    carried = _up(sshd_server, tmp_path, env, f" -o SetEnv=HF_TOKEN={planted}")
    assert carried.returncode == 2 and "$NAME" in carried.stderr
    up = _up(sshd_server, tmp_path, {**env, "RGT_DEBUG": "1"})
    lines = _logged(up)
    assert lines and all(m.group(1) == m.group(2) == "ssh" for m in lines)
    assert f"-p {sshd_server.port} -l root" in up.stderr and " 127.0.0.1 -- " in up.stderr
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "x.txt").write_text("data")
    pushed = _rgt("-v", "push", "box", "data", "--json", cwd=tmp_path, env=env)
    assert "rsync" in {m.group(2) for m in _logged(pushed)}
    # --secret sends it to the agent over stdin; in argv (the ssh line) the log masks it.
    ran = _rgt("-v", "run", "box", "--secret", "MY_SERVICE_CRED", "--probe-seconds", "1",
               "--json", "--", "sh", "-c", f"echo --password={planted}", cwd=tmp_path,
               env=env)  # fmt: skip
    assert _logged(ran) and all(float(m.group(3)) < 120 for m in _logged(ran))
    quiet = _rgt("push", "box", "data", "--json", cwd=tmp_path, env=env)
    assert quiet.returncode == 0 and "rgt.transport" not in quiet.stderr
    for proc in (carried, up, pushed, ran, quiet):
        assert planted not in proc.stderr and planted not in proc.stdout


@pytest.mark.parametrize(
    ("argv", "shown"),
    [
        (["env", "HF_TOKEN=hf_abcdef123", "python", "t.py"], "env HF_TOKEN=[redacted] python t.py"),
        (["train", "--api-key", "sk-123456", "--lr", "3"], "train --api-key [redacted] --lr 3"),
        (["sh", "-c", "t --db-token=abc123 -x"], "sh -c t --db-token=[redacted] -x"),
        (["git", "clone", "https://u:hunter22@h/r.git"], "git clone https://u:[redacted]@h/r.git"),
        (["curl", "-H", "Authorization: Bearer eyJ"], "curl -H Authorization: Bearer [redacted]"),
        (["ssh", "-o", "PasswordAuthentication=no", "-i", "/k/id_ed25519"],
         "ssh -o PasswordAuthentication=no -i /k/id_ed25519"),
    ],
)  # fmt: skip
def test_redaction_rules(argv: list[str], shown: str) -> None:
    assert " ".join(redact_argv(argv)) == shown


def test_registered_secret_is_masked_even_when_quoted(caplog: pytest.LogCaptureFixture) -> None:
    value = "it's-" + secrets.token_hex(6)
    register_secrets([value])
    log = logging.getLogger("rgt.transport.test")
    argv = ["ssh", "h", "--", f"run {value!r} x"]
    with caplog.at_level(logging.DEBUG, logger="rgt"), CommandLog(log, "ssh", argv):
        pass
    (record,) = caplog.records
    assert value not in record.getMessage() and MASK in record.getMessage()
    assert re.search(r"ssh \d+\.\d{3} s exit None: ssh h -- ", record.getMessage())
