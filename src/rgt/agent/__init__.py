"""The agent that runs ON the rented machine and keeps a job alive while nobody is connected.

Stdlib only, Python 3.8 syntax: it runs on whatever Python the rented image has. ``build.py``
(CLI side) packs it into ``agent-<version>.pyz``; on the machine it is run as
``python3 agent-<version>.pyz run|status|cancel JOB_DIR``.

    cli.py          the three subcommands
    supervisor.py   attempts, heartbeat, retry-or-stop, resume after an interruption
    _classify.py    why an attempt ended and whether a retry may help
    _record.py      status.json, events.jsonl and the webhook
    _manifest.py    hash, re-read and verify artifacts; DONE only after that
    _artifacts.py   which files are artifacts: outputs/, ckpt/, what changed in work/; caps
    _workdir.py     the job's own work/ (its cwd), populated once from the code snapshot
    _system.py      boot id, cgroup OOM counter, process groups
    probes/         readings of the machine (disk, cgroup, GPUs, host, input wait, progress):
                    the sentinel, ``patrol`` and ``audit`` take them; ``rgt audit``, the
                    Python-environment gate and ``rgt smoke`` reuse them on the CLI side
    verdicts/       the one artifact verifier: the manifest here, ``pull`` and
                    ``rgt verify artifacts`` on the CLI side

Everything under this folder ships in the zipapp except ``build.py``; the only other things
bundled are the public ``rgt.triage`` and ``rgt.ckpt`` and three shared single files
(``build.py`` says which and why). ``probes/`` and ``verdicts/`` import nothing of rgt but
themselves and those single files (``tests/test_layers.py``), so the CLI side can use them
without loading the supervisor.
"""
