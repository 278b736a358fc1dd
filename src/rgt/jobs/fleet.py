"""SSH fleets: one job on several machines, one node each (`rgt run A,B -- CMD`).

No scheduler, no k3s, no Docker: every node is a machine registered with ``rgt up`` (ssh or
local), and every node runs its own agent under the same job id. The first machine is node 0,
the master. Each node's spec carries the rendezvous variables a launcher needs, so

    torchrun --nnodes "$RGT_NNODES" --node_rank "$RGT_NODE_RANK" \\
             --master_addr "$RGT_MASTER_ADDR" --master_port "$RGT_MASTER_PORT" train.py

works unchanged. ``RGT_MASTER_ADDR`` is the host rgt connects to for node 0, unless the other
nodes must use another address (a private network: ``--master-addr``); ``RGT_MASTER_PORT`` is a
port that was free on node 0 when the job was launched.

Everything that can be refused is refused before anything starts: a machine named twice, an
unknown or released one, a backend that is not a plain box, ``--nodes`` that disagrees with the
list, a node that does not answer, and a node whose copy of the code is not the snapshot the
others run. One snapshot (one digest) is pushed to every node; a node that already had a folder
of that name is checked file by file, since a copy edited or cut short there would make the
nodes run different code and fail at the first collective, or worse, not fail.

The local store keeps one job record (node 0's machine, ``spec.nodes`` listing the fleet); the
group's state is read from every node (``rgt.status.fleet``).
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Sequence
from typing import TYPE_CHECKING

from rgt.backends import backend_for
from rgt.backends._render.fit import BOXES, fit
from rgt.backends.base import Backend
from rgt.errors import TransportError, UsageError
from rgt.models import JobRecord
from rgt.state.store import Store
from rgt.status import cache as status_cache
from rgt.transport.snapshot import Snapshot, take_snapshot

if TYPE_CHECKING:
    from rgt.jobs.launch import LaunchOptions
    from rgt.resources import Resources

# Asks the kernel of node 0 for a port nobody holds (bind to 0) and prints it.
FREE_PORT = (
    "import socket; s = socket.socket(); s.bind(('', 0)); print(s.getsockname()[1]); s.close()"
)
# Every file of a code snapshot with its sha256, in one stable order ("<sha>  ./<path>").
LIST_CODE = 'cd "$1" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 -r sha256sum'


def names_of(machines: str) -> list[str]:
    """``a,b`` -> ``["a", "b"]``; an empty name or a machine named twice is refused."""
    names = [name.strip() for name in machines.split(",")]
    if any(not name for name in names):
        raise UsageError(
            f"{machines!r} has an empty machine name",
            fix="list the fleet's machines with commas and nothing between: rgt run a,b -- CMD",
        )
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise UsageError(
            f"machine {', '.join(twice)} is named twice in the fleet {machines!r}: one machine "
            "is one node",
            fix="name each machine once (more processes on one machine: torchrun --nproc_per_node)",
        )
    return names


def one_machine(names: Sequence[str], option: str) -> str:
    """The one machine of ``names``; a fleet is refused for what works per machine."""
    if len(names) > 1:
        raise UsageError(
            f"{option} takes one machine, not the fleet {','.join(names)}",
            fix=f"run it for each machine: {' ; '.join(f'rgt run {n} {option} …' for n in names)}",
        )
    return names[0]


def launch_fleet(
    store: Store, names: Sequence[str], options: LaunchOptions, master_addr: str | None = None
) -> JobRecord:
    """Check every node, push the code to each, record the job and start an agent per node."""
    from rgt.jobs.launch import _read_secrets, new_job_id

    backends = [_node(store, name) for name in names]
    resources = _fit(backends, options.resources)
    secrets = _read_secrets(options.secret_env)
    if options.notify:
        secrets.update(options.notify.secrets())
    for rank, backend in enumerate(backends):
        _answers(rank, backend)
    snapshot = take_snapshot(options.cwd)
    for backend in backends:
        backend.push_snapshot(snapshot)
    for rank, backend in enumerate(backends):
        _same_code(rank, backend, snapshot)
    rendezvous = {
        "RGT_NNODES": str(len(backends)),
        "RGT_MASTER_ADDR": master_addr or master_host(backends[0]),
        "RGT_MASTER_PORT": str(free_port(backends[0])),
    }
    job_id = options.job_id or new_job_id(names[0])
    return _submit(store, backends, options, job_id, snapshot, resources, rendezvous, secrets)


def _submit(
    store: Store,
    backends: list[Backend],
    options: LaunchOptions,
    job_id: str,
    snapshot: Snapshot,
    resources: Resources | None,
    rendezvous: dict[str, str],
    secrets: dict[str, str],
) -> JobRecord:
    from rgt.jobs.launch import build_spec

    names = tuple(b.machine.name for b in backends)
    specs = [
        build_spec(b, options, job_id, snapshot.digest, resources,
                   {**rendezvous, "RGT_NODE_RANK": str(rank)}, names)
        for rank, b in enumerate(backends)
    ]  # fmt: skip
    record = store.add_job(specs[0])
    started: list[Backend] = []
    try:
        for backend, spec in zip(backends, specs, strict=True):
            backend.submit(spec, secrets or None, resources)
            started.append(backend)
    except BaseException:
        _stop(started, job_id)  # a fleet with a node missing would wait at its rendezvous
        status_cache.never_submitted(store, [job_id])
        raise
    return record


def _stop(started: list[Backend], job_id: str) -> None:
    for backend in started:
        try:
            backend.cancel(job_id)
        except Exception:  # the failure that brought us here is the one to show
            continue


def _node(store: Store, name: str) -> Backend:
    backend = backend_for(store, name)  # an unknown name: UnknownMachineError with the known
    if not backend.machine.active:
        raise UsageError(
            f"machine {name} was released",
            fix=f"register it again with `rgt up … --name {name}`, or leave it out of the fleet",
        )
    if backend.kind not in BOXES:
        raise UsageError(
            f"machine {name} is a {backend.kind} machine; a fleet is made of ssh or local "
            "machines, one node each",
            fix="on a cluster ask its scheduler for nodes (`rgt run CLUSTER --nodes N`); a "
            "fleet lists machines registered with `rgt up ssh`",
        )
    return backend


def _fit(backends: list[Backend], requested: Resources | None) -> Resources | None:
    """``--nodes`` must say what the list says; the rest is each machine's to honour."""
    if requested is None:
        return None
    if requested.nodes is not None and requested.nodes != len(backends):
        names = ",".join(b.machine.name for b in backends)
        raise UsageError(
            f"--nodes {requested.nodes} but the fleet {names} is {len(backends)} machines "
            "(one node each)",
            fix=f"drop --nodes (the list says {len(backends)}), or list {requested.nodes} machines",
        )
    per_node = dataclasses.replace(requested, nodes=None)
    for backend in backends:
        fit(backend, per_node)
    return per_node


def _answers(rank: int, backend: Backend) -> None:
    """Node ``rank`` runs a command (one round trip) before anything is copied anywhere."""
    try:
        backend.transport.check(["true"])
    except TransportError as exc:
        raise TransportError(
            f"node {rank} ({backend.machine.name}) does not answer: {exc.message}; "
            "nothing was started on any node",
            host=exc.host,
            fix=f"bring {backend.machine.name} back (a stopped rental, a moved ssh port: "
            f"register its current ssh line with `rgt up … --name {backend.machine.name}`), "
            "or leave it out of the fleet",
        ) from exc


def _same_code(rank: int, backend: Backend, snapshot: Snapshot) -> None:
    """Node ``rank``'s ``code/<digest>`` holds exactly the snapshot's files and bytes."""
    remote = backend.root.snapshot(snapshot.digest)
    listing = backend.transport.check(["sh", "-c", LIST_CODE, "sh", remote]).text()
    there = dict(_listed(line) for line in listing.splitlines() if line.strip())
    here = {f.rel: _sha256(snapshot, f.rel) for f in snapshot.files}
    differ = sorted(p for p in set(here) | set(there) if here.get(p) != there.get(p))
    if differ:
        raise UsageError(
            f"node {rank} ({backend.machine.name}) has other code under the snapshot "
            f"{snapshot.digest[:12]} than the other nodes: {', '.join(differ[:3])}"
            f"{' …' if len(differ) > 3 else ''} differ(s); the nodes would run different code",
            fix=f"remove {remote} on {backend.machine.name} (edited or cut short there) and "
            "run again: rgt copies the snapshot afresh",
        )


def _listed(line: str) -> tuple[str, str]:
    digest, _, path = line.partition("  ")
    return path[2:] if path.startswith("./") else path, digest


def _sha256(snapshot: Snapshot, rel: str) -> str:
    return hashlib.sha256((snapshot.root / rel).read_bytes()).hexdigest()


def master_host(backend: Backend) -> str:
    """The address rgt reaches node 0 by: what the other nodes use unless told otherwise."""
    return str(backend.machine.connection.get("host") or "127.0.0.1")


def free_port(backend: Backend) -> int:
    """A port free on node 0 now (the kernel's choice), for this job's rendezvous."""
    out = backend.transport.check([backend.python, "-c", FREE_PORT]).text().strip()
    if not out.isdigit():
        raise UsageError(
            f"could not pick a free port on {backend.machine.name} ({out[-200:]!r})",
            fix="check that its python runs (`rgt audit NAME`)",
        )
    return int(out)


def machines(record: JobRecord) -> tuple[str, ...]:
    """The job's machines by node rank: the fleet, or its one machine."""
    return record.spec.nodes or (record.machine,)


def node_machine(record: JobRecord, rank: int | None) -> str:
    """The machine of node ``rank`` (None: node 0) of ``record``."""
    names = machines(record)
    if rank is None:
        return names[0]
    if not 0 <= rank < len(names):
        raise UsageError(
            f"job {record.job_id} has no node {rank} (nodes 0..{len(names) - 1}: "
            f"{', '.join(names)})",
            fix=f"give --node 0 to {len(names) - 1}",
        )
    return names[rank]


def cancel(store: Store, record: JobRecord) -> dict[str, object]:
    """Stop the job on every node; node 0's answer, with each node's."""
    answers = [backend_for(store, name).cancel(record.job_id) for name in machines(record)]
    if len(answers) == 1:
        return answers[0]
    return {**answers[0], "nodes": answers}
