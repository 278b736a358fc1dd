"""One round trip that reads a Slurm machine: the agent's ``patrol`` and the controller's view.

A status read of N Slurm jobs needs two things from the machine that answers: every job's
files (``status.json``, liveness, progress: the agent's ``patrol``) and what the controller
says of each (``scontrol show job``). Both run in one ``sh -c`` on that machine and come
back as one text, cut by marker lines that JSON (whose strings escape newlines) and
``scontrol -o`` (one line per job) never print at the start of a line:

    <patrol's JSON document>
    @@rgt-patrol <exit status, or "missing" when the agent file is not installed>
    @@rgt <job> <Slurm id>
    <scontrol's line, or its error>

The controller is asked for each job that has a ``slurm.json`` (rgt wrote it at submit).
When it cannot be reached (``slurmctld`` down, a network cut: each try waits Slurm's
``MessageTimeout``, 10 s by default, plus retries) it is asked once, not once per job, and its
error is kept per job: the agent's own word stands then, never a guess that the job ended.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from rgt.backends._slurm_state import SlurmJob, parse_scontrol

PATROL_MARK = "\n@@rgt-patrol "
JOB_MARK = "\n@@rgt "
# Slurm no longer holds the job (ended longer than MinJobAge ago, or never known).
FORGOTTEN = "Invalid job id"
# Job ids and paths are arguments ("$@"), never code. Without ids: every job dir on the machine.
SCRIPT = r"""py=$1 agent=$2 root=$3 events=$4 gpu=; [ "$5" = no-gpu ] && gpu=--no-gpu
shift 5
if [ -f "$agent" ]; then
  "$py" -S "$agent" patrol "$root" --events "$events" $gpu; rc=$?
else
  rc=missing
fi
printf '\n@@rgt-patrol %s\n' "$rc"
[ $# -gt 0 ] || for dir in "$root"/jobs/*/; do set -- "$@" "$(basename "$dir")"; done
down=
for job in "$@"; do
  id=$(sed -n 's/^ *"slurm_job_id": *"\([0-9_]*\)".*/\1/p' "$root/jobs/$job/slurm.json" 2>/dev/null)
  [ -n "$id" ] || continue
  printf '@@rgt %s %s\n' "$job" "$id"
  [ -z "$down" ] || { printf '%s\n' "$down"; continue; }
  out=$(scontrol show job -o "$id" 2>&1); rc=$?
  printf '%s\n' "$out"
  case "$rc:$out" in 0:*|*"Invalid job id"*) ;; *) down=$out ;; esac
done
"""


@dataclass(frozen=True)
class SlurmView:
    """What the controller said of one job: ``job`` None with no ``error`` means it no
    longer knows the job; ``error`` says it could not be asked (the controller is down)."""

    slurm_id: str
    job: SlurmJob | None
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The view as it travels in a job's patrol document (``SlurmBackend._patrol``)."""
        job = asdict(self.job) if self.job is not None else None
        return {"slurm_id": self.slurm_id, "job": job, "error": self.error}

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> SlurmView:
        job = doc.get("job")
        found = SlurmJob(**job) if isinstance(job, Mapping) else None
        error = doc.get("error")
        return cls(str(doc.get("slurm_id")), found, str(error) if error is not None else None)


@dataclass(frozen=True)
class MachineRead:
    patrol: str | None  # the agent's JSON text; None: the agent is missing or failed
    views: dict[str, SlurmView]


def argv(
    python: str, agent: str, root: str, events: int, gpu: bool, ids: Sequence[str]
) -> list[str]:
    flag = "gpu" if gpu else "no-gpu"
    return ["sh", "-c", SCRIPT, "sh", python, agent, root, str(events), flag, *ids]


def parse(text: str) -> MachineRead:
    """The script's output as the agent's document (text) and the controller's views."""
    patrol, _, rest = f"\n{text}".partition(PATROL_MARK)
    status, _, rest = rest.partition("\n")
    views = dict(_view(section) for section in f"\n{rest}".split(JOB_MARK)[1:])
    return MachineRead(patrol if status.strip() == "0" else None, views)


def _view(section: str) -> tuple[str, SlurmView]:
    head, _, text = section.partition("\n")
    job_id, _, slurm_id = head.partition(" ")
    found = parse_scontrol(text)
    if found is not None or FORGOTTEN in text or not text.strip():
        return job_id, SlurmView(slurm_id, found)
    return job_id, SlurmView(slurm_id, None, error=text.strip().splitlines()[-1][:300])
