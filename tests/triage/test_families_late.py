"""More members of each symptom family, from the kinds of failure the late batch showed.

Each list holds one family written the way its different reporters print it (old and new torch,
dash and bash, Slurm/PBS/LSF/HTCondor, Kubernetes/Flyte/Docker, OpenSSH old and new, NCCL's IB
transport), never only the one phrasing a public log happened to use. Where a shell can produce
the symptom here, the test runs it and classifies what it really printed.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from rgt.triage import classify

NAN_LINES = [
    "[R0] | E6 iter[ 14/ 15] | [Loss] nan | [step]   104 | [time] 0.4m",
    "<loss> NaN </loss>",
    "(loss) -inf",
    "epoch 3 loss: tensor([nan], device='cuda:0')",
    "{'loss': array([nan], dtype=float32)}",
    "'train/loss': 'nan'",
    "epoch 7 | elbo: nan | kl: nan | recon: 31.2",
    "val_nll = inf",
    "step 200 mse=nan psnr=12.1",
    "Loss [nan]",
]
HEALTHY_LINES = [
    "[Loss] 51566519.44 | [exp] ./exp/0125/car | [url] none",
    "[kl_weight] 0.5 | [info] nan_to_num applied",
    "loss: 0.41 | skipped infinite batches: 0",
    "mse=0.013 psnr=28.1 finance=1.0",
]


@pytest.mark.parametrize("line", NAN_LINES)
def test_nan_under_any_key_format_is_nan_loss(line: str) -> None:
    assert classify(f"step 1 loss 0.9\n{line}\n", exit_code=0).label == "nan_loss"


@pytest.mark.parametrize("line", HEALTHY_LINES)
def test_bracketed_healthy_metrics_are_no_nan(line: str) -> None:
    assert classify(f"{line}\n", exit_code=0).label == "unknown"


# A kill stated in words by whoever ran the process: the same fact as exit status 137, read the
# same way (``memory.sigkill_no_traceback``, ``memory.torchrun_sigkill``): host_oom, never
# retried, and any preemption evidence in the same log wins (yields_to).
SIGKILL_REPORTED = [
    "[f8107735c673549d7acd-n0-0] terminated with exit code (137). Reason [Error]. Message: \n.",
    "train_1  | exited with code 137",
    "Process finished with exit code 137 (interrupted by signal 9: SIGKILL)",
    "subprocess.CalledProcessError: Command '['python', 'train.py']' returned non-zero exit "
    "status 137.",
    '{"containerStatuses": [{"state": {"terminated": {"exitCode": 137, "reason": "Error"}}}]}',
    "ERROR: worker 3 exit_code=137",
    "main process was killed by signal 9",
    "Error: exit status 1: signal: killed",
    "make: *** [Makefile:12: train] Error 137",
    "torch.multiprocessing.spawn.ProcessExitedException: process 0 terminated with signal SIGKILL",
]


@pytest.mark.parametrize("log", SIGKILL_REPORTED)
def test_a_sigkill_any_reporter_states_is_an_unconfirmed_host_oom(log: str) -> None:
    verdict = classify(log + "\n")
    assert (verdict.label, verdict.retryable) == ("host_oom", False)


def test_a_reported_sigkill_yields_to_preemption_evidence() -> None:
    log = "*** JOB 9 ON gpu1 CANCELLED AT 2024-01-01T00:00:00 DUE TO PREEMPTION ***\n"
    verdict = classify(log + "train_1 exited with code 137\n")
    assert (verdict.label, verdict.retryable) == ("preempted", True)


@pytest.mark.parametrize(
    "line",
    [
        '  File "anago/reader.py", line 137, in data_generator',
        "epoch 137 loss 0.31",
        "worker exited with code 1370",
        "exit code 0, 137 files written",
    ],
)
def test_137_that_is_no_exit_status_is_no_kill(line: str) -> None:
    assert classify(line + "\n", exit_code=1).label != "host_oom"


MEMORY_KILLS = [
    "Container killed by YARN for exceeding memory limits. 9.1 GB of 9 GB physical memory used.",
    "Container [pid=8121,containerID=c_01] is running beyond physical memory limits. Killing "
    "container.",
    "The worker was OOM killed.",
    "Job 12 was terminated because it exceeded its memory limit (32G)",
    "slurmstepd: error: job 5 exceeded its memory limit and was killed",
    "slurmstepd: error: Job 123 exceeded memory limit (5000000 > 4000000), being killed",
    "[ 812.35] Killed process 3456 (python3) total-vm:98765432kB, anon-rss:87654321kB",
    "OSError: [Errno 12] Cannot allocate memory",
    "Your session crashed after using all available RAM.",
    "memory.events: oom_kill 1",
]


@pytest.mark.parametrize("log", MEMORY_KILLS)
def test_a_kill_the_reporter_blames_on_memory_is_host_oom(log: str) -> None:
    assert classify(log + "\n").label == "host_oom"


TIME_LIMITS = [
    "ERROR:RetryJob Not retrying job due to wall clock limit (job automatically killed on the "
    "worker node)",
    "Job 4412 exceeded its wall-clock limit and was killed",
    "job killed: walltime limit reached",
    "The job exceeded allowed execute duration of 2:00:00",
    "=>> job 81 exceeded its hard run time limit",
    "Wall time limit exceeded; job terminated by the batch system",
    "  Reason:  DeadlineExceeded\n  Message: Job was active longer than specified deadline",
]


@pytest.mark.parametrize("log", TIME_LIMITS)
def test_a_scheduler_time_limit_in_any_words_is_preempted(log: str) -> None:
    verdict = classify(log + "\n")
    assert (verdict.label, verdict.retryable) == ("preempted", True)


@pytest.mark.parametrize(
    "log",
    [
        "#PBS -l walltime=24:00:00\nRuntimeError: boom\n",
        "Wall clock limit: 04:00:00\nValueError: bad config\n",
        "requested run time limit 120 min\nKeyError: 'lr'\n",
    ],
)
def test_a_time_limit_setting_is_no_time_limit_kill(log: str) -> None:
    assert classify(log, exit_code=1).label == "code_error"


PREEMPTION_HINTS = [
    "INFO:tensorflow:An error was raised. This may be due to a preemption in a connected worker "
    "or parameter server. The current session will be closed and a new session will be created.",
    "worker-2: preemption event detected, draining",
    "Received a preemption signal, saving checkpoint",
]


@pytest.mark.parametrize("log", PREEMPTION_HINTS)
def test_a_preemption_named_by_the_framework_is_preempted(log: str) -> None:
    verdict = classify(log + "\n")
    assert (verdict.label, verdict.retryable) == ("preempted", True)


@pytest.mark.parametrize(
    "line",
    [
        "Restored model from preemption checkpoint at step 4000",
        "Registering preemption signal handler for SIGTERM",
        "resumed after a preemption at 03:12",
    ],
)
def test_a_run_that_handles_or_survived_a_preemption_is_not_preempted(line: str) -> None:
    log = line + '\nTraceback (most recent call last):\n  File "t.py", line 3\nKeyError: 1\n'
    assert classify(log, exit_code=1).label == "code_error"


def test_a_real_cause_outranks_a_framework_preemption_hint() -> None:
    log = (
        "INFO:tensorflow:An error was raised. This may be due to a preemption in a connected "
        "worker.\ntensorflow.python.framework.errors_impl.ResourceExhaustedError: "
        "RESOURCE_EXHAUSTED: Out of memory while trying to allocate 1.2G\n"
    )
    assert classify(log, exit_code=1).label == "cuda_oom"


SHM = [
    "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient "
    "shared memory",
    "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient "
    "shared",
    "RuntimeError: DataLoader worker (pid 4242) is killed by signal: Bus error. It is possible "
    "that dataloader's workers are out of shared memory.",
    "Fatal Python error: Bus error (insufficient shared memory for /dev/shm/torch_4242)",
]


@pytest.mark.parametrize("log", SHM)
def test_bus_errors_and_shared_memory_are_shm_however_cut(log: str) -> None:
    assert classify(log + "\n", exit_code=1).label == "shm"


def test_gpu_kernel_shared_memory_is_not_dev_shm() -> None:
    log = "triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: 98304\n"
    assert classify(log, exit_code=1).label != "shm"


SSH = [
    "ssh_exchange_identification: read: Connection reset by peer",
    "ssh_exchange_identification: Connection closed by remote host",
    "kex_exchange_identification: read: Connection reset by peer",
    "Connection reset by 10.0.0.7 port 22",
    "client_loop: send disconnect: Connection reset by peer",
    "Connection timed out during banner exchange",
    "packet_write_wait: Connection to 10.0.0.7 port 22: Connection reset by peer",
    "ssh_dispatch_run_fatal: Connection to 10.0.0.7 port 22: Broken pipe",
]


@pytest.mark.parametrize("log", SSH)
def test_an_ssh_connection_dropped_in_any_openssh_words_is_ssh_drop(log: str) -> None:
    verdict = classify(log + "\n")  # the words alone: exit status 255 would say ssh anyway
    assert (verdict.label, verdict.retryable, verdict.rule_id) == (
        "ssh_drop",
        True,
        "platform.ssh_drop",
    )


def test_a_gloo_peer_reset_is_not_ssh() -> None:
    log = "RuntimeError: [gloo/transport/tcp/pair.cc:598] Read error [10.0.0.7]:3921: Connection "
    assert classify(log + "reset by peer\n", exit_code=1).label == "nccl"


DTYPE = [
    "RuntimeError: expected backend CUDA and dtype Float but got backend CUDA and dtype Half",
    "RuntimeError: expected dtype Float but got dtype Long",
    "RuntimeError: Expected object of type torch.cuda.LongTensor but found type "
    "torch.cuda.FloatTensor for argument #2 'target'",
    "RuntimeError: Expected tensor for argument #1 'indices' to have scalar type Long; but got "
    "torch.cuda.FloatTensor instead (while checking arguments for embedding)",
    "RuntimeError: Expected tensor for argument #1 'indices' to have one of the following scalar "
    "types: Long, Int; but got torch.FloatTensor instead (while checking arguments for embedding)",
    "RuntimeError: Expected query, key, and value to have the same dtype, but got query.dtype: "
    "float key.dtype: c10::Half",
]


@pytest.mark.parametrize("log", DTYPE)
def test_a_dtype_clash_in_the_words_of_old_and_new_torch_is_dtype(log: str) -> None:
    assert classify(log + "\n", exit_code=1).label == "dtype"


DEVICE = [
    "RuntimeError: expected backend CPU and dtype Float but got backend CUDA and dtype Float",
    "RuntimeError: Expected object of backend CPU but got backend CUDA for argument #2 'weight'",
    "RuntimeError: Expected object of type torch.FloatTensor but found type torch.cuda.FloatTensor "
    "for argument #2 'weight'",
]


@pytest.mark.parametrize("log", DEVICE)
def test_the_same_old_torch_messages_naming_two_devices_are_device_mismatch(log: str) -> None:
    assert classify(log + "\n", exit_code=1).label == "device_mismatch"


NCCL_FABRIC = [
    "NCCL error: remote process exited or there was a network error, NCCL version 2.14.3 "
    "ncclRemoteError: A call failed possibly due to a network error or a remote process exiting "
    "prematurely. Last error: NET/IB : Got completion from peer 11.2.1.12<39138> with error 12, "
    "opcode 0, len 0, vendor err 129",
    "gpu7:1234:1290 [3] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion with error "
    "12, opcode 1, len 32657, vendor err 129\nncclRemoteError: remote process exited or there "
    "was a network error",
    "NCCL WARN NET/IB : ibv_poll_cq failed\nrecvValue failed",
    "mlx5: gpu3: got completion with error: IBV_WC_RETRY_EXC_ERR (transport retry counter "
    "exceeded)\nncclRemoteError",
]


@pytest.mark.parametrize("log", NCCL_FABRIC)
def test_an_infiniband_fabric_error_is_nccl_and_not_retried_in_place(log: str) -> None:
    verdict = classify(log + "\n", exit_code=1)
    assert (verdict.label, verdict.retryable, verdict.rule_id) == (
        "nccl",
        False,
        "distributed.nccl_fabric",
    )


def test_nccl_on_infiniband_that_only_says_which_device_it_uses_is_no_fabric_error() -> None:
    log = "NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:10.0.0.1<0>\nncclRemoteError\n"
    assert classify(log, exit_code=1).rule_id == "distributed.nccl_peer_lost"


CRLF = [
    # dash (Debian's sh): a CR at the end of the command name returns the cursor, so the message
    # is printed over the script name - as a terminal (and a copied issue) shows it
    ": not foundin.sh: 2:\n: not foundin.sh: 6:\nscripts/train.sh: 18: Syntax error: word "
    'unexpected (expecting "in")',
    ": not found",
    # the same bytes, as a log file keeps them
    "scripts/train.sh: 2: \r: not found",
    "run.sh: 5: python\r: not found",
    "python3: can't open file '/work/train.py\\r': [Errno 2] No such file or directory",
    "FileNotFoundError: [Errno 2] No such file or directory: 'data/train_list.txt\\r'",
    # an env without quoting, rendered: "/usr/bin/env: python" overwritten from the start
    ": No such file or directory",
]


@pytest.mark.parametrize("log", CRLF)
def test_crlf_symptoms_of_every_shell_printed_or_rendered(log: str) -> None:
    assert classify(log + "\n", exit_code=2).label == "crlf"


def test_a_plain_command_not_found_is_not_crlf() -> None:
    assert classify("run.sh: 5: nvidia-smi: not found\n", exit_code=127).label != "crlf"


@pytest.mark.parametrize("shell", ["dash", "bash"])
def test_a_real_shell_on_a_crlf_script_is_crlf(shell: str, tmp_path: Path) -> None:
    if shutil.which(shell) is None:
        pytest.skip(f"{shell} is not installed")
    script = tmp_path / "train.sh"
    script.write_bytes(b"#!/bin/sh\r\n\r\necho start\r\ncd /tmp\r\n")
    proc = subprocess.run([shell, str(script)], capture_output=True, timeout=30)
    log = (proc.stdout + proc.stderr).decode()
    assert classify(log, exit_code=proc.returncode).label == "crlf", log


def test_a_signal_the_launcher_forwards_is_the_cause_not_the_cascade() -> None:
    closing = "WARNING:torch.distributed.elastic.multiprocessing.api:Sending process 10224{} "
    cut = (
        'Traceback (most recent call last):\n  File "runpy.py", line 194, in _run_module_as_main\n'
    )
    hangup = closing.format("1 closing signal SIGHUP\n") + closing.format(
        "2 closing signal SIGHUP\n"
    )
    assert classify(hangup + cut, exit_code=1).label == "ssh_drop"
    # SIGTERM on that line is torchrun ending the surviving ranks after one failed: no cause
    cascade = closing.format("1 closing signal SIGTERM\n") + "RuntimeError: CUDA error: an illegal"
    assert classify(cascade + " memory access was encountered\n", exit_code=1).label != "preempted"


PORT_IN_USE = [
    # torch >= 2.4 (libuv TCPStore), as om-ai-lab/VLM-R1#289 reported it
    "RuntimeError: The server socket has failed to listen on any local network address. port: "
    "29500, useIpv6: 0, code: -98, name: EADDRINUSE, message: address already in use.",
    # older torch, as showlab/Tune-A-Video#90 reported it
    "RuntimeError: The server socket has failed to listen on any local network address. The "
    "server socket has failed to bind to [::]:29500 (errno: 98 - Address already in use). The "
    "server socket has failed to bind to 0.0.0.0:29500 (errno: 98 - Address already in use).",
]


@pytest.mark.parametrize("log", PORT_IN_USE)
def test_a_rendezvous_port_already_taken_is_named_and_not_retried(log: str) -> None:
    verdict = classify(log + "\n", exit_code=1)
    assert (verdict.label, verdict.retryable, verdict.rule_id) == (
        "nccl",
        False,
        "distributed.port_in_use",
    )
    assert "--master_port" in verdict.remedy


def test_the_store_torch_cannot_open_on_a_taken_port_is_named() -> None:
    """What this torch really prints when rank 0's store meets a port another process holds."""
    pytest.importorskip("torch")
    import socket
    import sys

    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        code = f"import torch.distributed as d; d.TCPStore('127.0.0.1', {port}, 2, True)"
        run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode == 1 and "Traceback" in run.stderr, run.stderr
    verdict = classify(run.stderr, exit_code=1)
    assert (verdict.label, verdict.rule_id) == ("nccl", "distributed.port_in_use"), run.stderr
