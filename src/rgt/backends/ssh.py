"""Any machine reached over SSH: a bare box or an SSH rental (AutoDL, vast.ai, RunPod, …).

The primitives are few: the agent is started detached with ``setsid -f`` (or inside ``tmux``
when the profile says the platform kills long-lived nohup processes), code snapshots go up with
rsync into a staging dir of their own launch and are renamed into place only when complete,
and the meter is stopped by the *user* in the platform's console: an SSH rental has no API rgt
may call, so ``stop_meter`` says exactly what to do instead of pretending.

``register_ssh`` backs ``rgt up PROFILE --name NAME --ssh LINE``: it parses the pasted line,
connects once (trusting and recording the host key), checks python3 and rsync, and picks the
durable root: ``--root`` > the profile's ``DURABLE_DIR`` (``~`` = the remote home) > ``$HOME``.
"""

from __future__ import annotations

import posixpath
import secrets
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from rgt.agent.paths import JobPaths
from rgt.backends.base import Backend, staging_path
from rgt.errors import BackendError, Consent, RgtError, UsageError, needs_human
from rgt.models import Machine
from rgt.resources import Resources
from rgt.state.store import Store, utcnow
from rgt.transport._ssh_line import parse_ssh_line
from rgt.transport.base import ProgressFn
from rgt.transport.snapshot import Snapshot, retire_damaged_argv
from rgt.transport.ssh import SshTarget, SshTransport, known_hosts_path

SSH_KINDS = ("ssh-rental", "cloud-api")  # profile kinds whose machines take an ssh line

# Runs on the machine. Secrets are read into a shell variable (memory only) and piped to the
# agent: never a file, never argv (printf is a shell builtin). The session ends only after the
# pipe is written, so no byte is lost when sshd closes the channel.
_SETSID = r"""
s=$1; log=$2; shift 2
if [ "$s" = 1 ]; then secrets=$(cat); else secrets=; fi
cd / || exit 1
if setsid --help 2>&1 | grep -q -- --fork; then
  printf '%s' "$secrets" | setsid -f "$@" >>"$log" 2>&1
else
  printf '%s' "$secrets" | nohup "$@" >>"$log" 2>&1 &
fi
"""

# tmux: the agent's stdin is the pane, so secrets travel through a fifo (a name, no stored data)
# that the pane's shell opens before the agent starts.
_TMUX = r"""
s=$1; fifo=$2; session=$3; inner=$4
command -v tmux >/dev/null 2>&1 || { echo "tmux is not installed on this machine" >&2; exit 3; }
if [ "$s" = 1 ]; then secrets=$(cat); mkfifo -m 600 "$fifo" || exit 1; fi
cd / && tmux new-session -d -s "$session" "$inner" || exit 1
if [ "$s" = 1 ]; then
  (printf '%s' "$secrets" >"$fifo"; rm -f "$fifo") </dev/null >/dev/null 2>&1 &
fi
"""

_PROBE = r"""
printf '%s\n' "$HOME"
command -v "$1" >/dev/null 2>&1 && "$1" -c 'import sys; print("%d.%d" % sys.version_info[:2])' \
  || echo none
command -v rsync >/dev/null 2>&1 && echo rsync || echo none
"""


class SshBackend(Backend):
    kind = "ssh"

    def __init__(self, machine: Machine) -> None:
        target = SshTarget.from_connection(machine.name, machine.connection)
        self.ssh = SshTransport(target)
        super().__init__(machine, self.ssh)

    def detach(
        self,
        argv: Sequence[str],
        *,
        job: JobPaths,
        stdin: bytes | None = None,
        resources: Resources | None = None,
    ) -> None:
        # An SSH machine has no scheduler: `resources` is not enforced (the box is the job's).
        if _detach_primitive(self.machine.profile) == "tmux":
            script, words = _TMUX, self._tmux_words(argv, job, stdin is not None)
        else:
            log = f"{self.root.agent_dir}/detach.log"
            script, words = _SETSID, ["1" if stdin is not None else "0", log, *argv]
        result = self.transport.run(["sh", "-c", script, "sh", *words], input=stdin, timeout=120)
        if not result.ok:
            raise BackendError(
                f"could not start the agent on {self.machine.name}",
                backend=self.kind,
                returncode=result.returncode,
                stderr_tail=result.stderr_tail(),
                fix="install tmux on the machine, or run `rgt audit` to see what is missing"
                if result.returncode == 3
                else None,
            )

    def _tmux_words(self, argv: Sequence[str], job: JobPaths, has_secrets: bool) -> list[str]:
        session = "rgt-" + job.job_id.replace(".", "_").replace(":", "_")
        fifo = f"/tmp/rgt-secrets-{secrets.token_hex(8)}"
        source = shlex.quote(fifo) if has_secrets else "/dev/null"
        # Not `exec`: the pane's shell must keep the pty open. The agent points its own stdio
        # at agent.log, and tmux closes a pane whose pty nobody holds, with SIGHUP.
        inner = f'{shlex.join(argv)} <{source}; echo "rgt agent exited ($?)"'
        return ["1" if has_secrets else "0", fifo, session, inner]

    def stop_meter(self) -> str:
        """SSH rentals are stopped in the platform's console; rgt says exactly how."""
        self.ssh.close()
        try:
            from rgt.profiles import load_profile

            stop = load_profile(self.machine.profile).meter_stop
        except (ImportError, RgtError):
            return (
                f"rgt cannot stop the meter of {self.machine.name} over SSH: stop or "
                "release it in your provider's console now, or it keeps billing"
            )
        return (
            f"rgt cannot stop the meter of {self.machine.name} over SSH. Do it yourself "
            f"now: {stop.action} — {stop.command}. Still billed afterwards: "
            f"{'; '.join(stop.still_bills) or 'nothing listed'}"
        )

    def push_snapshot(self, snapshot: Snapshot, progress: ProgressFn | None = None) -> str:
        """rsync the snapshot's files into this launch's own staging dir (resumable within the
        launch), check every file's hash there, then rename it into place: a snapshot is
        complete or absent, and concurrent launches never share a staging dir."""
        from rgt.transport.code_push import push_snapshot_files

        remote = self.root.snapshot(snapshot.digest)
        self.transport.check(retire_damaged_argv(remote))
        if self.transport.exists(remote):
            return remote
        self.transport.mkdir(self.root.code_dir)
        partial = staging_path(remote)
        try:
            push_snapshot_files(self.ssh, snapshot, partial, progress=progress)
            self.publish_snapshot(partial, remote)
        finally:
            self.discard_staging(partial)
        return remote


def _detach_primitive(profile: str) -> str:
    try:
        from rgt.profiles import load_profile

        return load_profile(profile).detach.primitive
    except (ImportError, RgtError):
        return "setsid"


# -- registration ---------------------------------------------------------------------------


def register_ssh(
    store: Store,
    profile: str,
    name: str,
    *,
    ssh_line: str | None,
    price: float | None = None,
    root: str | None = None,
) -> Machine:
    """Parse, connect (TOFU), check, pick the durable root, record. See the module docstring."""
    durable_default = _ssh_profile_durable_dir(profile)
    if not ssh_line:
        raise UsageError(
            f"profile {profile!r} needs the ssh line of the machine",
            fix=f'`rgt up {profile} --name {name} --ssh "ssh -p PORT user@host"` '
            "(paste the line the platform console shows)",
        )
    fields = parse_ssh_line(ssh_line)
    known = known_hosts_path(name)
    _forget_if_moved(store, name, fields, known)
    target = SshTarget(
        name=name,
        known_hosts=str(known),
        host=fields["host"],
        port=fields.get("port"),
        user=fields.get("user"),
        identity_file=fields.get("identity_file"),
        ssh_options=tuple(fields["ssh_options"]),
    )
    transport = SshTransport(target)
    home, python = _probe(transport)
    durable = _absolute(root or durable_default or "~", home)
    transport.check(["mkdir", "-p", "--", posixpath.join(durable, ".rgt")])
    connection = {**target.to_connection(), "python": python, "host_key": host_fingerprint(known)}
    machine = Machine(
        name=name,
        backend="ssh",
        profile=profile,
        connection=connection,
        durable_root=durable,
        price_per_hour=price,
        registered=utcnow(),
    )
    store.add_machine(machine)
    return machine


def _ssh_profile_durable_dir(profile: str) -> str | None:
    """The profile's ``DURABLE_DIR``; refuses profiles that are not reached over SSH."""
    from rgt.profiles import load_profile

    found = load_profile(profile)  # an unknown name raises UsageError listing the known ones
    if found.kind not in SSH_KINDS:
        raise UsageError(
            f"profile {profile!r} ({found.kind}) is not a machine reached over SSH",
            fix=f"SSH profiles: {', '.join(SSH_KINDS)} kinds, e.g. generic-ssh, autodl, runpod",
        )
    return found.durable_dir


def _absolute(path: str, home: str) -> str:
    """``~``, ``~/x`` and relative paths are under the remote user's home."""
    if path == "~" or path.startswith("~/"):
        path = home + path[1:]
    return posixpath.normpath(posixpath.join(home, path))


def _forget_if_moved(store: Store, name: str, fields: dict[str, Any], known: Path) -> None:
    """Re-registering a name for another address is a new machine: start a new trust."""
    try:
        old = store.machine(name).connection
    except RgtError:
        old = {}
    if (old.get("host"), old.get("port")) != (fields["host"], fields.get("port")):
        known.unlink(missing_ok=True)


def _probe(transport: SshTransport) -> tuple[str, str]:
    python = transport.target.python
    result = transport.check(["sh", "-c", _PROBE, "sh", python], timeout=60)
    lines = result.text().splitlines()
    home, version, rsync = ([*lines, "", "none", "none"])[:3]
    if version == "none" or tuple(map(int, version.split("."))) < (3, 8):
        raise UsageError(
            f"{transport.target.name} has no {python} >= 3.8 (found {version})",
            fix="install python3 on the machine (the rgt agent needs only the standard library)",
        )
    if rsync == "none":
        raise UsageError(
            f"{transport.target.name} has no rsync",
            fix="install it on the machine (`apt-get install -y rsync`), then run `rgt up` again",
        )
    return home or "/", python


def host_fingerprint(known_hosts: str | Path) -> str | None:
    """``SHA256:…`` of the recorded host key, for the user to compare with the console."""
    proc = subprocess.run(
        ["ssh-keygen", "-l", "-f", str(known_hosts)], capture_output=True, check=False, timeout=30
    )
    words = proc.stdout.decode().split()
    return words[1] if proc.returncode == 0 and len(words) > 1 else None


def retrust(store: Store, name: str, consent: Consent = needs_human) -> dict[str, Any]:
    """``rgt trust NAME``: read the key the machine presents now (into a scratch known_hosts),
    show it, and record it only after ``consent`` (the CLI: a human at the terminal, PIN once
    set)."""
    machine = store.machine(name)
    if machine.backend != "ssh":
        raise UsageError(f"{name} is not an SSH machine", fix="only SSH machines have host keys")
    target = SshTarget.from_connection(name, machine.connection)
    SshTransport(target).close()
    old = machine.connection.get("host_key")
    with tempfile.TemporaryDirectory() as scratch:
        probe = replace(target, known_hosts=str(Path(scratch) / "known_hosts"))
        transport = SshTransport(probe)
        transport.check(["true"])
        transport.close()
        new = host_fingerprint(probe.known_hosts)
        consent(
            f"{name} now presents host key {new} (recorded: {old}). Trust it only if the "
            "platform console shows this key or you re-rented or rebuilt the machine.",
            name,
            f"rgt trust {name}",
        )
        shutil.copyfile(probe.known_hosts, target.known_hosts)
    store.add_machine(replace(machine, connection={**machine.connection, "host_key": new}))
    return {"machine": name, "old_host_key": old, "new_host_key": new}
