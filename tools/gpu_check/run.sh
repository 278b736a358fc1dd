#!/usr/bin/env bash
# The prepared device check of issue 35: GPU assignment on a real nvidia-smi, FSDP2 with rgt's
# sharded saves on the GPU, a rank's kill -9 and exact resume under the real agent, and (for
# information) the save's blocking time against torch.distributed.checkpoint.async_save.
#
# HOW A SESSION CALLS IT (one call of the device tool's `run`, from the repository root):
#
#     command:   bash tools/gpu_check/run.sh
#     timeout_s: 540
#
# It needs only the machine's python3 (with torch) and this repository's src/ (PYTHONPATH is set
# here): no pip, no network, no click/rich/pytest. Each step has its own time budget
# (75 + 120 + 180 + 100 s at most; about 2-3 minutes in all when things work), and the whole
# run is stopped after 520 s, so its files still come back within timeout_s. Then call
# give_back unless you rerun at once. A rerun of some steps only: `... run.sh --steps 2,3`.
# If step 2 fails with "does not have a deterministic implementation", rerun with
# `GC_DETERMINISTIC=warn bash tools/gpu_check/run.sh` and say so.
#
# WHAT COMES BACK in $OUT (./gpu_check_out when OUT is unset), at most 8 files, each well under
# the tool's 16 MiB (the device returns 8 files at most, no deeper than 2 folders):
#     gpu_check.log          this whole output: every check's ok/FAILED line and its evidence
#     summary.json           the same verdicts, timings and numbers, machine-readable
#     nvidia-smi-query.csv   the raw answer to the agent's query (a real recording: it can go to
#                            tests/golden/nvidia-smi/ with a .source note, as the others did)
#     nvidia-smi.txt         the plain nvidia-smi table (GPU runs only)
#     step3-events.jsonl     the killed job's events (attempt_ended with the evidence, resuming)
#     step3-ranks.json       the launcher's per-rank failure record of attempt 1
#     step3-agent.log        the agent's own log of that job (last 256 KiB)
#     failures.log           only when something failed: the whole output of each failed command
#                            (torchrun, the job's attempts, the agents; last 256 KiB of each)
#
# WHAT TO PASTE INTO THE CLOSING NOTE: the device the tool reported (H100 or H200), the block
# from "=== RESULT" to the end of the output, each FAILED line with the lines under it, and
# from the log the numbers of step 2 (state MB, save blocking median/max, load seconds) and of
# step 4 (blocking and durable medians of "rgt async", "dcp.async_save" and "dcp.save", and
# "blocking rgt / async_save"). Say which world size ran (1 on a one-GPU machine: NCCL takes
# one GPU per rank, so the two-rank paths were checked on CPU/gloo only).
#
# The CPU dry run (tested by tests/agent/test_gpu_check_dry_run.py): gloo, CPU tensors, FSDP2 on
# the CPU, and a recorded nvidia-smi answer on PATH: two RTX 4090s (two ranks, rank 1 killed),
# or with `--smi 1xh100` the lent machine's shape (one H100: one rank, rank 0 killed):
#     OUT=/tmp/gpucheck bash tools/gpu_check/run.sh --cpu [--smi 1xh100]
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="${OUT:-$root/gpu_check_out}"
mkdir -p "$out"

# The first Python that has torch: $PYTHON, python3 (the device's /opt/torch/.venv), the venv.
py=""
for candidate in "${PYTHON:-}" python3 "$root/.venv/bin/python"; do
    if [ -n "$candidate" ] && "$candidate" -c "import torch" >/dev/null 2>&1; then
        py="$candidate"
        break
    fi
done
if [ -z "$py" ]; then
    echo "FAIL: no python with torch (tried \$PYTHON, python3, .venv/bin/python)" | tee "$out/gpu_check.log"
    exit 2
fi

export PYTHONPATH="$root/src${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
cd "$root" || exit 2
timeout -k 10 "${GC_TOTAL_S:-520}" "$py" "$here/check.py" --out "$out" "$@" 2>&1 | tee "$out/gpu_check.log"
code="${PIPESTATUS[0]}"
if [ "$code" = 124 ] || [ "$code" = 137 ]; then
    echo "FAIL: the check ran past ${GC_TOTAL_S:-520} s and was stopped" | tee -a "$out/gpu_check.log"
fi
exit "$code"
