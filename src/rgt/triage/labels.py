"""The fixed triage vocabulary (DESIGN.md, "Triage label vocabulary") and retry defaults.

A label names the root cause of a failed job. ``LABEL_RETRYABLE`` answers "may the agent restart
the job with the *same* config?" for the label in general; a rule may override it when its own
evidence says more (an NCCL failure caused by a peer that vanished, a transient network-mount I/O
error), and ``tests/triage`` pins every such exception.
"""

from __future__ import annotations

LABELS = (
    "cuda_oom",
    "host_oom",
    "shm",
    "nan_loss",
    "nccl",
    "disk_full",
    "cuda_driver",
    "device_assert",
    "device_mismatch",
    "shape_mismatch",
    "import_error",
    "corrupt_checkpoint",
    "preempted",
    "ssh_drop",
    "crlf",
    "gpu_hw",
    "dtype",
    "code_error",
    "unknown",
)

# Only a failure that the same config can survive is retryable: the platform took the machine
# (preempted), the connection dropped (ssh_drop), or the hardware broke (gpu_hw: retry, but on
# another machine). Everything else is a bug, a resource the config asks for and the machine lacks,
# or a full disk that stays full until someone frees space: a blind retry would burn GPU hours.
LABEL_RETRYABLE = {
    "cuda_oom": False,
    "host_oom": False,
    "shm": False,
    "nan_loss": False,
    "nccl": False,
    "disk_full": False,
    "cuda_driver": False,
    "device_assert": False,
    "device_mismatch": False,
    "shape_mismatch": False,
    "import_error": False,
    "corrupt_checkpoint": False,
    "preempted": True,
    "ssh_drop": True,
    "crlf": False,
    "gpu_hw": True,
    "dtype": False,
    "code_error": False,
    "unknown": False,
}

# Labels whose remedy is to retry on *another* machine: the agent never reruns them in place
# (``rgt.agent._classify.RETRIED_ELSEWHERE`` mirrors this; a test keeps the two equal).
RETRY_ELSEWHERE = ("gpu_hw",)

# Rules whose ``retryable`` differs from their label's default, and why. Kept next to the
# defaults so a reader sees every exception in one place; a test checks the rule files agree.
RETRY_EXCEPTIONS = {
    "distributed.nccl_peer_lost": "a peer rank or the rendezvous host vanished mid-collective",
    "storage.transient_io": "EIO/ESTALE on a network mount is usually a storage-service blip",
}
