"""The verbs every front end calls: each takes plain values, does the work through the layers
below, and returns a record (or the document ``--json`` prints).

``rgt run``'s CLI body, the MCP ``run`` tool and any later front end call ``verbs.run.run``;
``rgt status`` and the MCP ``status`` tool call ``verbs.status.report``. A front end parses its
own input (flags, a tool's arguments) and says the result its own way (a table, JSON, a page);
nothing here imports click, rich or a front end (``tests/test_layers.py`` checks it), and
nothing here talks to a human: chatter for one goes through the ``Tell`` a front end passes in.

- ``run``: lint → gates → launch (one machine or a fleet) → probe, as a ``RunResult``; the
  ``--dry-run`` forecast.
- ``status``, ``watch``: the machines-and-jobs documents, with billing, autostop and session
  clocks beside the patrol; ``target``: a machine name or a job id (or its prefix).
- ``pull``, ``fetch``, ``smoke``, ``triage``, ``offers``, ``profiles``: one verb each.
- ``up``: register or rent a machine through its platform's entry (``rgt.platforms``), with
  the defaults, GPU expectation and self-stop ``rgt up`` was given.
- ``deliver``: which delivery workspace a command works in.
- ``tell``: where a verb's warnings and progress go.
"""
