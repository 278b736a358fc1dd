"""Which launcher starts the job's ranks, and what the agent asks of it through the environment.

The user's command is never changed. torchrun (``python -m torch.distributed.run``, and the
``accelerate launch`` that calls it) reads every option it has from ``PET_<OPTION>`` when the
command line does not give it, and two more knobs from its own environment:

``PET_TEE=3`` and ``PET_LOG_DIR``
    each rank's stdout and stderr go to ``<log dir>/<run>/attempt_<k>/<local rank>/`` and, line
    by line, to torchrun's own output (the merged log, as before) behind a prefix;
``TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE="[rank${rank}]:"``
    that prefix names the global rank, so the merged log splits into ``rank-R.log``
    (``_ranklogs``);
``TORCHELASTIC_ERROR_FILE``
    where torchrun's own ``@record`` writes the first failing rank's error (its traceback) when
    the script's entry point was wrapped in ``@record``; torchrun sets each rank's own file.

``accelerate launch`` passes its own ``--tee`` default (``"0"``) over ``PET_TEE``, so its merged
log has prefixes only with ``accelerate launch --tee 3``. Whatever the launcher, torch (>= 2.2)
prefixes an uncaught traceback with ``[rankN]:`` once the process group exists, so the failing
rank's traceback is found in every case. ``deepspeed`` starts its ranks itself (no prefixes,
one "exits with return code" line for the child that failed). ``srun`` is recognised (the
attempt records it) but its output is left as it is: ``SLURM_LABELIO`` would prefix every line
with a bare ``N: ``, which a rule cannot tell from the job's own text.
"""

from __future__ import annotations

import os
import shlex
from typing import Dict, List, Optional

TORCHRUN = "torchrun"
ACCELERATE = "accelerate"
DEEPSPEED = "deepspeed"
SRUN = "srun"
RANK_PREFIX_TEMPLATE = "[rank${rank}]:"
# ``python -m MODULE`` spellings of each launcher.
_MODULES = {
    "torch.distributed.run": TORCHRUN,
    "torch.distributed.launch": TORCHRUN,
    "accelerate.commands.launch": ACCELERATE,
    "deepspeed.launcher.runner": DEEPSPEED,
}
_PROGRAMS = {"torchrun": TORCHRUN, "deepspeed": DEEPSPEED, "srun": SRUN}
# The user's own choice on the command line wins over the agent's environment defaults.
_OWN_LOGGING = ("--tee", "-t", "--redirects", "-r", "--log-dir", "--log_dir")


def recognise(command: List[str]) -> Optional[str]:
    """The launcher the command runs (``torchrun``, ``accelerate``, ``deepspeed``, ``srun``),
    also inside ``bash -c "..."``; None for a plain process."""
    words = _words(command)
    for index, word in enumerate(words):
        name = os.path.basename(word)
        if name in _PROGRAMS:
            return _PROGRAMS[name]
        if name == "accelerate" and "launch" in words[index + 1 : index + 2]:
            return ACCELERATE
        if name == "accelerate-launch":
            return ACCELERATE
        if word == "-m" and index + 1 < len(words) and words[index + 1] in _MODULES:
            return _MODULES[words[index + 1]]
    return None


def _words(command: List[str]) -> List[str]:
    words = []  # type: List[str]
    for arg in command:
        if " " in arg.strip():
            try:
                words.extend(shlex.split(arg))
                continue
            except ValueError:
                pass
        words.append(arg)
    return words


def env_for(launcher: Optional[str], command: List[str], attempt_dir: str) -> Dict[str, str]:
    """What the attempt's environment adds for this launcher; never overrides a value the
    user set (the job's environment is applied after, and wins)."""
    if launcher in (TORCHRUN, ACCELERATE):
        env = {
            "TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE": RANK_PREFIX_TEMPLATE,
            "TORCHELASTIC_ERROR_FILE": error_file(attempt_dir),
        }
        if launcher == TORCHRUN and not any(_given(word) for word in _words(command)):
            env.update({"PET_TEE": "3", "PET_LOG_DIR": os.path.join(attempt_dir, "torchrun")})
        return env
    return {}


def _given(word: str) -> bool:
    return word.split("=", 1)[0] in _OWN_LOGGING


def error_file(attempt_dir: str) -> str:
    return os.path.join(attempt_dir, "launcher-error.json")
