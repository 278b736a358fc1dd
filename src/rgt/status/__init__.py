"""The one status path: every view of a job's state reads the machine here and caches here.

``read`` (``rgt.status.read``) is the only caller of ``Backend.read_jobs``, the backend's one
batched read: the agent's ``patrol`` document and a typed ``JobStatus`` per job, liveness
decided by the backend (``interpret``). After the read it takes the one explicit step a read
may lead to on the machine: an end the scheduler saw and the job's agent could not record (a
plain ``scancel``) is recorded through ``Backend.cancel``, so the answer outlives the
scheduler's memory of the job; the read itself never changes anything.

``cache`` turns what the machine said into what to show (a vanished job dir, a launch that
never arrived, a damaged status.json) and is the only writer of job state into the local
store, adopted jobs included. ``fleet`` makes one status of a fleet job's nodes.
`rgt status`, `watch`, the gate, sweeps, adopt, pull, triage and autostop all come through
here; ``tests/test_status_path.py`` fails on any other caller of the read.
"""
