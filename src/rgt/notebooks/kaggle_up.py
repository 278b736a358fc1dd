"""`rgt up kaggle --name K [--gpu T4x2|P100|none] [--internet] [--dataset OWNER/SLUG]`.

Registering a Kaggle "machine" rents nothing: it records the account's username (read from
the credentials, which stay where they are), the accelerator and internet settings every
kernel of the machine gets, the datasets attached to them, and the local mirror directory
that holds what the kernels keep in ``/kaggle/working/rgt``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rgt.config import rgt_home
from rgt.errors import UsageError
from rgt.models import Machine
from rgt.notebooks.kaggle import QUOTA, SHAPES
from rgt.notebooks.kaggle_api import credentials
from rgt.state.store import Store, utcnow

DATASET_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*/[A-Za-z0-9][A-Za-z0-9_-]*$")


@dataclass(frozen=True)
class KaggleUp:
    gpu: str = "none"
    internet: bool = False
    datasets: tuple[str, ...] = ()


def check(up: KaggleUp) -> KaggleUp:
    if up.gpu not in SHAPES:
        raise UsageError(
            f"--gpu {up.gpu!r} is not a Kaggle accelerator rgt knows",
            fix=f"use one of {', '.join(SHAPES)}",
        )
    bad = [d for d in up.datasets if not DATASET_RE.match(d)]
    if bad:
        raise UsageError(f"--dataset {bad[0]!r} is not OWNER/SLUG", fix="e.g. --dataset me/my-data")
    return up


def register_kaggle(store: Store, name: str, up: KaggleUp) -> tuple[Machine, tuple[str, ...]]:
    """The machine and the notes shown at first contact. The credentials are read (and a
    key file other users can read is refused) now, so a bad set-up fails at ``up``."""
    check(up)
    creds = credentials()
    mirror = rgt_home() / "kaggle" / name
    mirror.mkdir(parents=True, exist_ok=True)
    machine = Machine(
        name=name,
        backend="kaggle",
        profile="kaggle",
        connection={
            "owner": creds.username,
            "gpu": up.gpu,
            "internet": up.internet,
            "datasets": list(up.datasets),
        },
        durable_root=str(mirror),
        registered=utcnow(),
    )
    store.add_machine(machine)
    return machine, notes(up)


def notes(up: KaggleUp) -> tuple[str, ...]:
    return (
        "each `rgt run` pushes a private script kernel; its files reach this machine "
        "when the version ends (`rgt status` downloads them)",
        "a version stopped at Kaggle's run-time limit is preempted: `rgt resume JOB` "
        "continues it from its newest checkpoint in a new version",
        f"weekly GPU quota: {QUOTA}; see kaggle.com → Settings",
        *(f"dataset {d} is mounted under /kaggle/input" for d in up.datasets),
        *(() if up.internet else ("kernels run without internet (add --internet)",)),
    )
