"""Whether a Slurm partition has the nodes a multi-node run asks for, before anything starts.

``sbatch --nodes 2`` on a partition of one node is accepted and then pends for ever (Slurm
holds it with ``Reason=PartitionNodeLimit`` or waits for a node that will never exist), so
the count is checked here against ``sinfo -h -N -o "%N %P"``: one line per node and
partition, the default partition marked with ``*``. Without ``--partition`` the job goes to
the default partition (or, where none is marked, the cluster's nodes together). How the job
then runs on its nodes is the agent's (``rgt.agent._slurm_nodes``).
"""

from __future__ import annotations

from rgt.errors import UsageError

SINFO_NODES = ("sinfo", "-h", "-N", "-o", "%N %P")


def partition_nodes(sinfo: str, partition: str | None) -> tuple[str, int]:
    """(partition name, how many distinct nodes it has) from ``SINFO_NODES``'s output;
    ``partition`` None: the default partition's (``*``), or every node's when none is marked."""
    by_partition: dict[str, set[str]] = {}
    default = None
    for line in sinfo.splitlines():
        words = line.split()
        if len(words) != 2:
            continue
        node, name = words
        if name.endswith("*"):
            name = default = name[:-1]
        by_partition.setdefault(name, set()).add(node)
    if partition is None and default is None:
        return "(all partitions)", len(set().union(*by_partition.values()))
    wanted = partition or str(default)
    return wanted, sum(len(by_partition.get(p, set())) for p in wanted.split(","))


def check_nodes(sinfo: str, partition: str | None, nodes: int) -> None:
    """Refuse ``--nodes`` over what the partition has, naming the partitions that have enough."""
    name, count = partition_nodes(sinfo, partition)
    if nodes <= count or not sinfo.strip():
        return
    raise UsageError(
        f"--nodes {nodes}: Slurm partition {name} has {count} node(s); the job would pend for ever",
        fix=f"ask for at most {count} node(s), or give a partition with more "
        "(`sinfo -s` lists them with their node counts)",
    )
