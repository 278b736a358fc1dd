"""Readings of a rented machine, taken on the machine itself (stdlib only, Python >= 3.8).

Bundled into the agent zipapp: the agent's sentinel reads them while a job runs, and the
agent's ``patrol``/``audit``/``reap`` subcommands return them to the CLI in one round trip.

    disk.py       bytes and inodes of the mount holding a path (``df -h`` and ``df -i`` in one)
    cgroup.py     cgroup v1/v2 memory current/limit, the OOM-kill counter, the CPU quota
    gpu.py        nvidia-smi query-gpu / query-compute-apps parsing, Xid lines from dmesg
    host.py       boot id, uptime, /dev/shm, VRAM held by processes that are not jobs
    progress.py   step and loss from metrics.jsonl or the log; NaN/Inf detection

Every reader returns plain JSON-able dicts and never raises for a missing file or tool: a
reading that cannot be taken is ``None`` plus a short ``error`` saying why.
"""
