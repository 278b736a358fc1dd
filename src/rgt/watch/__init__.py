"""Durable monitoring on the CLI side: patrol every machine, derive what the agent cannot
see, render it. The readings themselves are taken on the machine (``rgt.agent.probes``, run by the
agent); this package asks for them in one round trip per machine.

    remote.py    one agent call per machine (installs the agent when it is missing)
    patrol.py    all machines in parallel -> one report (jobs, readings, cost, events)
    events.py    CLI-side events: heartbeat lost, finished but not pulled; event ordering
    render.py    the rich tables of `rgt watch`
    audit.py     `rgt audit`: findings and their fixes from the agent's readings
"""
