"""Jobs: the on-disk layout on the machine, the local state store, queues and sweeps."""
