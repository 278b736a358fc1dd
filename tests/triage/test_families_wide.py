"""Wider members of each symptom family, and the healthy lines next to them that must stay quiet.

``test_families_late`` pins the families the late batch showed; this file widens each family to
the other tools and versions that print it (fairseq/DeepSpeed loss scalers, TF/Keras/JAX NaN
guards, zsh and macOS kills, systemd and Ray, c10d stores, argparse, NumPy 2, Keras shapes, DCGM
Xids) and holds the near misses a training log prints when nothing failed (a best loss of inf, a
cache over its memory limit, a preemption handler being installed): the outside logs rgt is
measured on hold both kinds.
"""

from __future__ import annotations

import pytest

from rgt.triage import classify

NAN_GUARDS = [
    "FloatingPointError: Minimum loss scale reached (0.0001). Your loss is probably exploding.",
    "Current loss scale already at minimum - cannot decrease scale anymore. Exiting run.",
    "tensorflow.python.framework.errors_impl.InvalidArgumentError: loss : Tensor had NaN values",
    "Batch 123: Invalid loss, terminating training",
    "FloatingPointError: invalid value (nan) encountered in mul",
    "RuntimeError: The total norm of order 2.0 for gradients from `parameters` is non-finite, so "
    "it cannot be clipped.",
    '  File "train.py", line 88, in step\n    assert not torch.isnan(loss).any()\nAssertionError',
    "NaN detected in loss at step 300",
    "WARNING: found NaNs in gradients, skipping batch",
    "loss contains NaN",
]


@pytest.mark.parametrize("log", NAN_GUARDS)
def test_the_guards_that_stop_a_run_on_a_nan_are_nan_loss(log: str) -> None:
    assert classify(log + "\n", exit_code=1).label == "nan_loss"


@pytest.mark.parametrize(
    "log",
    [
        "NaN values in column 'age' were dropped",
        "RuntimeWarning: invalid value encountered in divide",
        "assert batch.shape[0] == 8\nAssertionError",
    ],
)
def test_nan_words_off_the_loss_are_no_nan_loss(log: str) -> None:
    assert classify(log + "\n", exit_code=1).label != "nan_loss"


@pytest.mark.parametrize(
    "log",
    ["zsh: killed     python train.py", "[1]    1234 killed     python train.py", "Killed: 9"],
)
def test_a_bare_kill_in_every_shell_is_host_oom(log: str) -> None:
    assert classify(log + "\n").rule_id == "memory.bare_killed"


MORE_TIME_LIMITS = [
    "Job 123 reached its walltime and was killed",
    "Your job has been killed because it exceeded the maximum run time",
    "The job running on runner gpu-4 has exceeded the maximum execution time of 360 minutes.",
    "sbatch: error: Job 123 cancelled due to time limit",
    "Received Spot Instance interruption notice",
]


@pytest.mark.parametrize("log", MORE_TIME_LIMITS)
def test_a_job_out_of_time_in_plain_words_is_preempted(log: str) -> None:
    verdict = classify(log + "\n")
    assert (verdict.label, verdict.retryable) == ("preempted", True)


@pytest.mark.parametrize(
    "log",
    [
        "job 12 reached time step 500",
        "the job exceeded the expected loss, stopping",
        "job 7 hit runtime error in the data loader",
    ],
)
def test_a_job_and_a_time_that_is_no_limit_are_no_preemption(log: str) -> None:
    assert classify(log + "\n", exit_code=1).label != "preempted"


@pytest.mark.parametrize(
    "log",
    [
        "Terminated",
        "/var/spool/slurmd/job123/slurm_script: line 12:  4567 Terminated              python "
        "train.py",
        "srun: error: node01: task 0: Terminated",
    ],
)
def test_a_bare_terminated_is_the_text_of_a_sigterm(log: str) -> None:
    verdict = classify("step 9 loss 0.3\n" + log + "\n")
    assert (verdict.label, verdict.retryable) == ("preempted", True)


def test_a_bare_terminated_after_a_traceback_is_not_a_sigterm() -> None:
    log = 'Traceback (most recent call last):\n  File "t.py", line 1\nKeyError: 3\nTerminated\n'
    assert classify(log, exit_code=1).label == "code_error"


NCCL_MORE = [
    "RuntimeError: [1] is setting up NCCL communicator and retrieving ncclUniqueId from [0] via "
    "c10d key-value store by key '0', but store->get('0') got error: Connection reset by peer",
    "RuntimeError: Socket Timeout",
    "[E socket.cpp:957] [c10d] The client socket has timed out after 900s while trying to connect "
    "to (127.0.0.1, 29500).",
    "RuntimeError: Rank 0 successfully reached monitoredBarrier, but received errors while "
    "waiting for send/recv from rank 1. Please check rank 1 logs for faulty rank.",
    "RuntimeError: connect() timed out. Original timeout was 1800000 ms.",
    "misc/socket.cc:484 NCCL WARN Call to connect returned Connection refused, retrying",
]


@pytest.mark.parametrize("log", NCCL_MORE)
def test_collective_and_store_failures_of_torch_1_and_2_are_nccl(log: str) -> None:
    assert classify(log + "\n", exit_code=1).label == "nccl"


def test_nccl_running_out_of_gpu_memory_is_cuda_oom() -> None:
    log = "include/alloc.h:48 NCCL WARN Cuda failure 'out of memory'\nNCCL error: unhandled cuda\n"
    assert classify(log, exit_code=1).label == "cuda_oom"


CRLF_QUOTED = [
    "train.py: error: argument --mode: invalid choice: 'train\\r' (choose from 'train', 'eval')",
    "ValueError: invalid literal for int() with base 10: '10\\r'",
    "usage: train.py [-h] [--lr LR]\ntrain.py: error: unrecognized arguments: \r",
    "usage: train.py [-h] [--lr LR]\ntrain.py: error: unrecognized arguments: ",
]


@pytest.mark.parametrize("log", CRLF_QUOTED)
def test_a_word_that_ends_in_a_carriage_return_is_crlf(log: str) -> None:
    assert classify(log + "\n", exit_code=2).label == "crlf"


def test_a_quoted_carriage_return_yields_to_a_cuda_oom() -> None:
    log = "warning: key 'name\\r' unknown\nRuntimeError: CUDA out of memory. Tried to allocate 2G\n"
    assert classify(log, exit_code=1).label == "cuda_oom"


def test_argparse_naming_a_real_unknown_argument_is_no_crlf() -> None:
    log = "usage: train.py [-h]\ntrain.py: error: unrecognized arguments: --lrr 3e-4\n"
    assert classify(log, exit_code=2).label != "crlf"


OTHER_FAMILIES = [
    (
        "dtype",
        "RuntimeError: \"nll_loss_forward_reduce_cuda_kernel_2d_index\" not implemented for 'Int'",
    ),
    (
        "dtype",
        "RuntimeError: Expected attn_mask dtype to be bool or float or to match query dtype, "
        "but got attn_mask.dtype: long int and  query.dtype: float instead.",
    ),
    ("dtype", "RuntimeError: FlashAttention only support fp16 and bf16 data type"),
    (
        "dtype",
        "RuntimeError: CUDA error: CUBLAS_STATUS_NOT_SUPPORTED when calling `cublasGemmEx( "
        "handle, opa, opb, m, n, k, &falpha, a, CUDA_R_16BF, lda, b, CUDA_R_16BF, ldb)`",
    ),
    (
        "corrupt_checkpoint",
        "RuntimeError: unexpected EOF, expected 12345 more bytes. The file might be corrupted.",
    ),
    (
        "corrupt_checkpoint",
        "OSError: Consistency check failed: file should be of size 4976698672 "
        "but has size 2147483648 (model-00001-of-00002.safetensors).",
    ),
    (
        "corrupt_checkpoint",
        "OSError: Unable to open file (truncated file: eof = 123, "
        "sblock->base_addr = 0, stored_eof = 456)",
    ),
    (
        "cuda_driver",
        "RuntimeError: CUDA unknown error - this may be due to an incorrectly set up "
        "environment, e.g. changing env variable CUDA_VISIBLE_DEVICES after program start.",
    ),
    (
        "cuda_driver",
        "RuntimeError: cuDNN version incompatibility: PyTorch was compiled  against "
        "(8, 9, 2) but found runtime version (8, 5, 0).",
    ),
    ("gpu_hw", "dcgm: GPU 3 XID 79 reported"),
    ("gpu_hw", "nvidia-smi -q: Row Remapping: Pending: Yes\nRow remapping pending"),
    (
        "shm",
        "RuntimeError: Too many open files. Communication with the workers is no longer "
        "possible. Please increase the limit using `ulimit -n` in the shell or change the sharing "
        "strategy by calling `torch.multiprocessing.set_sharing_strategy('file_system')`",
    ),
    (
        "ssh_drop",
        "Received disconnect from 10.0.0.7 port 22:2: Timeout, your session not responding.",
    ),
    ("ssh_drop", "[2024-05-01 10:00:00] Received SIGHUP, exiting"),
]


@pytest.mark.parametrize(("label", "log"), OTHER_FAMILIES)
def test_more_members_of_the_other_families(label: str, log: str) -> None:
    assert classify(log + "\n", exit_code=1).label == label


@pytest.mark.parametrize(
    "log",
    [
        "NVRM: Xid (PCI:0000:41:00): 13, pid=1, Graphics Exception",
        "XID 13 reported for GPU 2",
        "request 79.5 ms, xid 7912",
    ],
)
def test_a_program_xid_or_a_number_that_looks_like_one_is_no_hardware_failure(log: str) -> None:
    assert classify(log + "\n", exit_code=1).label != "gpu_hw"


CODE_FAMILIES = [
    (
        "import_error",
        "A module that was compiled using NumPy 1.x cannot be run in\nNumPy 2.0.0 as it "
        "may crash. To support both 1.x and 2.x versions of NumPy, modules must be compiled with "
        "NumPy 2.0.",
    ),
    (
        "import_error",
        "RuntimeError: module compiled against API version 0x10 but this version of numpy is 0xe",
    ),
    (
        "import_error",
        "RuntimeError: Failed to import transformers.models.llama.modeling_llama "
        "because of the following error (look up to see its traceback):",
    ),
    ("import_error", "/bin/sh: 1: python: not found"),
    (
        "import_error",
        "ERROR: Could not find a version that satisfies the requirement "
        "torch==2.9.9 (from versions: 2.1.0)\nERROR: No matching distribution found for torch",
    ),
    (
        "import_error",
        "importlib.metadata.PackageNotFoundError: No package metadata was found for bitsandbytes",
    ),
    (
        "import_error",
        "OSError: [WinError 126] The specified module could not be found. Error "
        'loading "C:\\torch\\lib\\c10.dll" or one of its dependencies.',
    ),
    (
        "shape_mismatch",
        "RuntimeError: Error(s) in loading state_dict for Net:\n\tMissing key(s) "
        'in state_dict: "fc.weight", "fc.bias".',
    ),
    (
        "shape_mismatch",
        "UserWarning: Using a target size (torch.Size([32])) that is different to "
        "the input size (torch.Size([32, 1])). This will likely lead to incorrect results",
    ),
    (
        "shape_mismatch",
        "RuntimeError: shape mismatch: value tensor of shape [3] cannot be "
        "broadcast to indexing result of shape [2]",
    ),
    ("shape_mismatch", "ValueError: cannot reshape array of size 12 into shape (5,3)"),
    (
        "shape_mismatch",
        'ValueError: Input 0 of layer "dense" is incompatible with the layer: '
        "expected axis -1 of input shape to have value 784, but received input with shape (28, 28)",
    ),
    (
        "shape_mismatch",
        "RuntimeError: input.size(-1) must be equal to input_size. Expected 128, got 64",
    ),
    ("shape_mismatch", "AssertionError: Input image size (256*256) doesn't match model (224*224)."),
    (
        "device_mismatch",
        "TypeError: can't convert cuda:0 device type tensor to numpy. Use "
        "Tensor.cpu() to copy the tensor to host memory first.",
    ),
    (
        "device_mismatch",
        "RuntimeError: module must have its parameters and buffers on device "
        "cuda:0 (device_ids[0]) but found one of them on device: cpu",
    ),
    (
        "device_mismatch",
        "RuntimeError: Attempting to deserialize object on CUDA device 1 but "
        "torch.cuda.device_count() is 1. Please use torch.load with map_location",
    ),
]


@pytest.mark.parametrize(("label", "log"), CODE_FAMILIES)
def test_more_members_of_the_code_families(label: str, log: str) -> None:
    assert classify(log + "\n", exit_code=1).label == label


def test_a_missing_program_under_dash_is_an_import_error_but_a_cr_in_its_name_is_crlf() -> None:
    assert classify("/bin/sh: 1: torchrun: not found\n", exit_code=127).label == "import_error"
    assert classify("run.sh: 3: python\r: not found\n", exit_code=127).label == "crlf"


@pytest.mark.parametrize(
    "line",
    [
        "best_val_loss = inf (initial)",
        "min_loss: inf",
        "Best Loss: inf",
        "Epoch 00001: val_loss improved from inf to 0.52341, saving model to model.h5",
        "INFO: found 0 NaNs in gradients",
        "Checking for nan in loss: none found",
        "Retired pages: 0, Row remapping failure: No",
        "NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB ib0:10.0.0.1<0>",
        "#SBATCH --time=2-00:00:00\nJob 1234 started, wall time limit: 48:00:00",
        "Memory limit: 64G, memory used: 12G",
        "Process finished with exit code 0",
    ],
)
def test_healthy_lines_near_a_family_fire_no_rule(line: str) -> None:
    assert classify(line + "\n", exit_code=1).label == "unknown"


@pytest.mark.parametrize(
    "line",
    [
        "The dataset exceeds the memory limit of the cache; streaming from disk instead",
        "cache: evicted 12 entries over memory limit",
        "data: 'abc\\r' stripped from 12 lines",
        "sshd[123]: Connection closed by 10.0.0.7 port 51234 [preauth]",
        "Time limit reached. Elapsed time is 1:00:00. Signaling Trainer to stop.",
        "Registered signal handler for SIGTERM and SIGKILL",
        "Epoch 137: loss 0.31",
        "NCCL INFO NET/IB : GPU Direct RDMA Enabled for HCA 0 'mlx5_0'",
    ],
)
def test_more_healthy_lines_near_a_family_fire_no_rule(line: str) -> None:
    assert classify(line + "\n", exit_code=1).label == "unknown"


MORE_KILLS = [
    (
        "memory.sigkill_reported",
        "systemd[1]: train.service: Main process exited, code=killed, status=9/KILL",
    ),
    ("memory.host_oom_killer", "Task was killed due to the node running low on memory."),
    ("memory.host_oom_killer", "WARNING: container was terminated due to excessive memory usage"),
    (
        "memory.host_oom_killer",
        "ray.exceptions.OutOfMemoryError: Task was killed due to the node "
        "running low on memory. Memory on the node was 61.2GB / 64GB (0.95)",
    ),
]


@pytest.mark.parametrize(("rule_id", "log"), MORE_KILLS)
def test_systemd_and_ray_kills_are_host_oom(rule_id: str, log: str) -> None:
    verdict = classify(log + "\n", exit_code=1)
    assert (verdict.label, verdict.rule_id) == ("host_oom", rule_id)


def test_torch_out_of_memory_error_is_still_the_gpu() -> None:
    log = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
    assert classify(log, exit_code=1).label == "cuda_oom"


@pytest.mark.parametrize(
    "log",
    [
        "[rank1]:[E1120 03:14:15.926 ProcessGroupNCCL.cpp:1595] [PG ID 0 PG GUID 0(default_pg) "
        "Rank 1] Received a dump signal due to a collective timeout from this local rank and we "
        "will try our best to dump the debug info.",
        "torch.distributed.elastic.rendezvous.api.RendezvousConnectionError: The connection to the "
        "C10d store has failed.",
    ],
)
def test_collective_timeouts_of_torch_2_5_and_later_are_nccl(log: str) -> None:
    assert classify(log + "\n", exit_code=1).label == "nccl"


ACCELERATOR_OOM = [
    "E external/xla/xla/stream_executor/cuda/cuda_driver.cc:628] failed to alloc 1610612736 bytes "
    "on host: CUDA_ERROR_OUT_OF_MEMORY: out of memory",
    "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. "
    "Ran out of memory in memory space hbm. Used 20.5G of 15.48G hbm.",
    "RuntimeError: MPS backend out of memory (MPS allocated: 17.00 GB, other allocations: 1.23 MB, "
    "max allowed: 18.13 GB). Tried to allocate 1.20 GB on private pool.",
    "RuntimeError: cuDNN error: CUDNN_STATUS_ALLOC_FAILED",
    "ValueError: Some modules are dispatched on the CPU or the disk. Make sure you have enough GPU "
    "RAM to fit the quantized model.",
]


@pytest.mark.parametrize("log", ACCELERATOR_OOM)
def test_the_accelerators_memory_by_every_reporter_is_cuda_oom(log: str) -> None:
    assert classify(log + "\n", exit_code=1).label == "cuda_oom"


def test_tensorflow_saying_its_allocator_shortfall_is_not_a_failure_is_no_oom() -> None:
    log = (
        "W tensorflow/core/common_runtime/bfc_allocator.cc:290] Allocator (GPU_0_bfc) ran out of "
        "memory trying to allocate 2.26GiB with freed_by_count=0. The caller indicates that this "
        "is not a failure, but may mean that there could be performance gains if more memory were "
        "available.\n"
    )
    assert classify(log, exit_code=1).label == "unknown"


@pytest.mark.parametrize(
    "log",
    [
        "failed to register layer: write /var/lib/docker/overlay2/x: no space left on device",
        "UserWarning: Not enough free disk space to download the file. The expected file size is: "
        "4976.70 MB. The target location /root/.cache/huggingface/hub only has 812.33 MB free disk "
        "space.",
    ],
)
def test_a_full_disk_in_go_and_hugging_face_words_is_disk_full(log: str) -> None:
    assert classify(log + "\n", exit_code=1).label == "disk_full"
