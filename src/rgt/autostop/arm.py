"""Arming and disarming autostop on a machine: the human at the terminal, then the machine.

`rgt approve NAME --autostop …` goes through the same approval as a release (the controlling
terminal, the machine's name typed, the approval PIN): a stop is a cost decision (invariant 4),
and an agent that could arm one could also make a machine stop under a running job. The policy is
built and checked first (nothing is asked for a policy that would be refused), then written to
``<durable>/.rgt/autostop/policy.json`` on the machine, where the watcher reads it with the laptop
closed; the watcher is started detached (the backend's primitive), the webhook URL over its stdin.
"""

from __future__ import annotations

import getpass
import json
from dataclasses import replace
from typing import Any

from rgt.autostop import policy as pol
from rgt.errors import Consent, UsageError, needs_human
from rgt.state.store import Store

ACTION_ARM = "autostop"
ACTION_DISARM = "autostop-off"


def prepare(store: Store, name: str, options: pol.Options, money: dict[str, Any]) -> dict[str, Any]:
    """The checked policy; raises before anyone is asked anything. ``money``: the machine's
    ``price_per_hour`` and ``spent_at_arm``, as the ledger has them (the caller reads them:
    the vendors' money clock sits above this layer)."""
    from rgt.profiles import load_profile

    machine = store.machine(name)
    if not machine.active:
        raise UsageError(f"{name} was released", fix="arm autostop on an active machine")
    return pol.build(machine, load_profile(machine.profile), options, money)


def arm(
    store: Store,
    name: str,
    options: pol.Options,
    money: dict[str, Any],
    notify_url: str | None = None,
    consent: Consent = needs_human,
) -> dict[str, Any]:
    """Check, ask the human through ``consent`` (the CLI: at the terminal; with no human to
    ask, ``ApprovalNeeded``), write the policy on the machine, start its watcher."""
    doc = prepare(store, name, options, money)
    what = f"Autostop on {name} runs `{doc['stop']['command']}` once every job ended and its "
    what += "results are verified on storage that survives the stop."
    tty = consent(what, name, f"rgt approve {name} --autostop")
    install(store, name, doc, notify_url)
    store.add_approval(name, f"{ACTION_ARM}:{doc['arm_id']}", getpass.getuser(), tty)
    remember(store, name, doc["arm_id"])
    return {"machine": name, "armed": True, "policy": doc}


def install(store: Store, name: str, doc: dict[str, Any], notify_url: str | None) -> None:
    from rgt.agent._autostop_files import AutostopFiles
    from rgt.backends import backend_for

    backend = backend_for(store, name)
    agent = backend.install_agent()
    files = AutostopFiles(backend.root.root)
    backend.transport.mkdir(files.dir)
    backend.transport.write_bytes(files.policy, (json.dumps(doc, indent=2) + "\n").encode())
    start_watcher(backend, agent, notify_url, str(doc["arm_id"]))


def start_watcher(backend: Any, agent: str, notify_url: str | None, arm_id: str) -> None:
    from rgt.agent._autostop_files import AutostopFiles
    from rgt.agent._webhook import NOTIFY_SECRET
    from rgt.agent.paths import JobPaths

    files = AutostopFiles(backend.root.root)
    argv = [backend.python, "-S", agent, "autostop", backend.root.root, "--takeover"]
    stdin = None
    if notify_url:
        argv.append("--secrets-stdin")
        stdin = json.dumps({NOTIFY_SECRET: notify_url}).encode()
    # The watcher is not a job: it borrows the detach primitive under a name of this arming
    # (tmux needs a session name no earlier watcher still holds).
    backend.detach(argv, job=JobPaths(files.dir, f"autostop-{arm_id}"), stdin=stdin)


def disarm(store: Store, name: str, consent: Consent = needs_human) -> dict[str, Any]:
    """`--autostop off`: a human's consent too; the watcher exits at its next tick."""
    from rgt.agent._autostop_files import AutostopFiles
    from rgt.backends import backend_for

    backend = backend_for(store, name)
    files = AutostopFiles(backend.root.root)
    what = f"Disarming autostop on {name}: its meter then runs until you stop it."
    tty = consent(what, name, f"rgt approve {name} --autostop off")
    had = backend.transport.exists(files.policy)
    backend.transport.run(["rm", "-f", "--", files.policy])
    store.add_approval(name, ACTION_DISARM, getpass.getuser(), tty)
    remember(store, name, None)
    return {"machine": name, "armed": False, "was_armed": had}


def remember(store: Store, name: str, arm_id: str | None) -> None:
    """The machine's record says an arming exists, so `rgt status` knows whom to ask."""
    machine = store.machine(name)
    connection = {k: v for k, v in machine.connection.items() if k != ACTION_ARM}
    if arm_id:
        connection[ACTION_ARM] = arm_id
    store.add_machine(replace(machine, connection=connection))


def declare_self_stop(store: Store, name: str, command: str) -> str:
    """`rgt up … --self-stop CMD`: kept in the machine's record (the user's declaration)."""
    pol.check_self_stop(command)
    machine = store.machine(name)
    store.add_machine(replace(machine, connection={**machine.connection, "self_stop": command}))
    return f"self-stop for autostop: `{command}` (arm it with `rgt approve {name} --autostop`)"


def status(store: Store, name: str) -> dict[str, Any]:
    """The machine's autostop report (``patrol``: one round trip)."""
    from rgt.backends import backend_for
    from rgt.status.read import read

    patrol = read(backend_for(store, name), events=0).patrol
    report: dict[str, Any] = patrol.get("autostop") or {"armed": False}
    return report
