"""The one exception tree of rgt.

Library code raises these; only the CLI (``rgt.cli.main``) turns them into words and exit codes.
Every error carries a ``fix`` sentence that tells the user what to do next, and fields a caller
can act on (host, job_id, path, returncode, stderr_tail).

    RgtError                         exit 1 unless a subclass says otherwise
    ├── UsageError (ValueError)      exit 2: bad input, named field, allowed values
    │   ├── SpecError                a malformed job spec / results.json / profile field
    │   ├── UnknownMachineError      no machine by that name in the state DB
    │   ├── UnknownJobError          no job by that id
    │   ├── AmbiguousJobError        a short job id that several jobs' ids start with
    │   └── NotSupportedError        a verb this backend cannot do (names the backend and verb)
    ├── GateRefused                  exit 3: a gate (teardown, approval) said no, with reasons
    │   └── ApprovalNeeded           a step needs a human's consent and no human was asked
    ├── StateError                   the local state DB is unusable (locked, newer schema)
    │   ├── StateWriteError          the state DB refused a write (disk full, I/O, read-only)
    │   └── StateFileError           a job's status/manifest on the machine is cut or garbled
    ├── TransportError (OSError)     the connection failed; says nothing about the job
    │   └── HostKeyChangedError      a known machine presented a different host key
    ├── JobError                     a job failed; carries job_id and the triage label
    ├── CheckpointError              rgt.ckpt could not save or load
    │   └── DiskBudgetError          not enough bytes or inodes on the checkpoint mount
    ├── VerifyError                  an artifact failed load-verification or its hash check
    │   └── UnsafeNameError          a name from outside (hub, manifest) would leave its destination
    └── BackendError                 a backend's API or command failed (returncode, stderr_tail)
        └── VendorError              a vendor API answered an error (status, code, instance_id)
            └── KeyRefusedError      the vendor refused the API key (HTTP 401/403): no retry
    UsageError
        └── MissingKeyError          no API key in the environment or credentials.toml
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Callable


class RgtError(Exception):
    """Base of every error rgt raises on purpose."""

    exit_code = 1

    def __init__(self, message: str, *, fix: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.fix = fix

    def to_dict(self) -> dict[str, object]:
        data: dict[str, object] = {"error": type(self).__name__, "message": self.message}
        if self.fix:
            data["fix"] = self.fix
        for key, value in vars(self).items():
            if key not in ("message", "fix") and not key.startswith("_"):
                data[key] = value
        return data


class UsageError(RgtError, ValueError):
    """Bad input from the user: a flag, a file, a name. Nothing was changed."""

    exit_code = 2


class SpecError(UsageError):
    """A structured file (job spec, results.json, profile) has a bad field."""

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        field: str | None = None,
        fix: str | None = None,
    ) -> None:
        super().__init__(message, fix=fix)
        self.path = path
        self.field = field


class UnknownMachineError(UsageError):
    def __init__(self, name: str, known: Sequence[str] = ()) -> None:
        listing = ", ".join(known) if known else "none registered"
        super().__init__(
            f"no machine named {name!r} (known: {listing})",
            fix="register it first with `rgt up PROFILE --name NAME`, or check `rgt status`",
        )
        self.name = name


class UnknownJobError(UsageError):
    def __init__(self, job_id: str) -> None:
        super().__init__(f"no job with id {job_id!r}", fix="list jobs with `rgt status`")
        self.job_id = job_id


class AmbiguousJobError(UsageError):
    """A short job id that more than one job's id starts with."""

    def __init__(self, prefix: str, candidates: Sequence[str]) -> None:
        shown = ", ".join(candidates[:10]) + (", …" if len(candidates) > 10 else "")
        super().__init__(
            f"job id {prefix!r} is ambiguous: {len(candidates)} jobs start with it ({shown})",
            fix="give more characters of the job id (see `rgt status`)",
        )
        self.prefix = prefix
        self.candidates = list(candidates)


class NotSupportedError(UsageError):
    """A verb the machine's backend cannot do (secrets on Slurm, a shell detach on Kubernetes).
    Nothing was started or changed on the machine."""

    def __init__(self, verb: str, backend: str, *, why: str = "", fix: str) -> None:
        reason = f": {why}" if why else ""
        super().__init__(f"{verb} is not supported on {backend}{reason}", fix=fix)
        self.verb = verb
        self.backend = backend


class GateRefused(RgtError):
    """A gate refused a destructive or cost-affecting step; ``reasons`` says why."""

    exit_code = 3

    def __init__(
        self,
        message: str,
        reasons: Sequence[str],
        *,
        fix: str | None = None,
        verdict: dict[str, Any] | None = None,
        notes: Sequence[str] = (),
    ) -> None:
        super().__init__(message, fix=fix)
        self.reasons = list(reasons)
        self.verdict = verdict
        self.notes = list(notes)


class ApprovalNeeded(GateRefused):
    """A destructive step needs a human's consent and the caller gave no way to ask one.

    Library code never prompts: a function that needs consent takes a ``Consent`` (the CLI
    passes ``rgt.lifecycle.approvals.approve_at_terminal``) and defaults to
    ``needs_human``, which raises this with the command the human runs in their own terminal."""

    def __init__(self, message: str, *, command: str) -> None:
        fix = f"run `{command}` yourself, in a terminal"
        super().__init__(message, [f"a human must approve: `{command}`"], fix=fix)
        self.command = command


# (what will happen, the machine's name, the command a human runs) -> the terminal's name
# (typing's Callable: the alias is evaluated at import, and the job's Python may be 3.8)
Consent = Callable[[str, str, str], str]


def needs_human(what: str, name: str, command: str) -> str:
    """The consent of a caller that has no human to ask (MCP, scripts): always refused."""
    raise ApprovalNeeded(f"{what} This needs a human's approval.", command=command)


class StateError(RgtError):
    """The local state database cannot be used."""


class StateWriteError(StateError):
    """The state DB could not be opened or written: its disk is full, failed, read-only, or
    another process held it too long. The transaction was rolled back: nothing half-written.
    ``reason``: disk_full, io_error, readonly, locked, corrupt, cannot_open."""

    def __init__(
        self, message: str, *, path: str, mount: str, reason: str, fix: str | None = None
    ) -> None:
        super().__init__(message, fix=fix)
        self.path = path
        self.mount = mount
        self.reason = reason


class StateFileError(StateError):
    """A job's state file (status.json, manifest.json) or its directory cannot be believed:
    cut by a full disk, garbled, or gone. ``kind``: corrupt, unreadable, job_dir_missing."""

    def __init__(
        self, message: str, *, path: str, kind: str, job_id: str, fix: str | None = None
    ) -> None:
        super().__init__(message, fix=fix)
        self.path = path
        self.kind = kind
        self.job_id = job_id


class TransportError(RgtError, OSError):
    """The connection to a machine failed. This is never evidence that a job failed."""

    def __init__(
        self,
        message: str,
        *,
        host: str | None = None,
        returncode: int | None = None,
        stderr_tail: str = "",
        fix: str | None = None,
    ) -> None:
        super().__init__(message, fix=fix)
        self.host = host
        self.returncode = returncode
        self.stderr_tail = stderr_tail


class HostKeyChangedError(TransportError):
    """A machine we trusted before now presents a different host key."""


class JobError(RgtError):
    def __init__(
        self, message: str, *, job_id: str, label: str | None = None, fix: str | None = None
    ) -> None:
        super().__init__(message, fix=fix)
        self.job_id = job_id
        self.label = label


class CheckpointError(RgtError):
    """rgt.ckpt could not save or load a checkpoint."""

    def __init__(self, message: str, *, path: str | None = None, fix: str | None = None) -> None:
        super().__init__(message, fix=fix)
        self.path = path


class DiskBudgetError(CheckpointError, OSError):
    """Refused to write: the mount lacks the bytes or inodes the checkpoint needs."""

    def __init__(
        self,
        message: str,
        *,
        path: str,
        mount: str,
        need_bytes: int,
        free_bytes: int,
        free_inodes: int | None,
        fix: str | None = None,
    ) -> None:
        super().__init__(message, path=path, fix=fix)
        self.mount = mount
        self.need_bytes = need_bytes
        self.free_bytes = free_bytes
        self.free_inodes = free_inodes


class VerifyError(RgtError):
    """An artifact did not load, had non-finite values, or its hash did not match."""

    def __init__(self, message: str, *, path: str | None = None, fix: str | None = None) -> None:
        super().__init__(message, fix=fix)
        self.path = path


class UnsafeNameError(VerifyError):
    """A name chosen outside rgt (a hub's file list, a machine's manifest, a vendor's output
    listing, an archive member) that cannot be placed under its destination: absolute, ``..``,
    NUL, a backslash or drive, an empty component, or a symbolic link on the way
    (``rgt._confine``). Nothing was written for it."""

    def __init__(self, message: str, *, name: str, reason: str, fix: str) -> None:
        super().__init__(message, path=name, fix=fix)
        self.name = name
        self.reason = reason


class BackendError(RgtError):
    """A backend's command or API call failed."""

    def __init__(
        self,
        message: str,
        *,
        backend: str,
        returncode: int | None = None,
        stderr_tail: str = "",
        fix: str | None = None,
    ) -> None:
        super().__init__(message, fix=fix)
        self.backend = backend
        self.returncode = returncode
        self.stderr_tail = stderr_tail


class VendorError(BackendError):
    """A vendor API (RunPod, vast.ai, Lambda, Paperspace) answered an error. ``instance_id`` is
    set when the failed call still made an instance (it bills: it is recorded, never dropped)."""

    def __init__(
        self,
        message: str,
        *,
        backend: str,
        status: int | None = None,
        code: str | None = None,
        instance_id: str | None = None,
        fix: str | None = None,
    ) -> None:
        super().__init__(message, backend=backend, returncode=status, fix=fix)
        self.status = status
        self.code = code
        self.instance_id = instance_id


class KeyRefusedError(VendorError):
    """HTTP 401/403: the key is wrong, revoked or lacks a permission. Never retried."""


class MissingKeyError(UsageError):
    def __init__(self, vendor: str, variable: str, path: str) -> None:
        super().__init__(
            f"no API key for {vendor}: ${variable} is unset and {path} has no [{vendor}] key",
            fix=f'export {variable}=… or add `[{vendor}]` `api_key = "…"` to {path} (mode 0600)',
        )
        self.vendor = vendor
        self.variable = variable
        self.path = path
