"""Jobs, from this computer's side: launching them (`rgt run`, SSH fleets), reading their status
through the one status path (``rgt.status``, the only writer of the local copy), adopting
jobs launched elsewhere, pushing code and data, pulling and re-checking artifacts, `rgt resume`,
`rgt triage JOB`'s inputs and the ``--notify`` webhook. What runs on the machine is in
``rgt.agent``; the state DB in ``rgt.state``; sweeps in ``rgt.sweep``; `rgt smoke` in
``rgt.smoke``."""
