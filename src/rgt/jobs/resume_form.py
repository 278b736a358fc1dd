"""``--resume-with`` and ``--ckpt``: how a restart resumes a script with its own resume flag.

Many training scripts were not written for rgt but can resume: nanoGPT's
``--init_from=resume`` reads ``out_dir/ckpt.pt``, the Hugging Face examples take
``--resume_from_checkpoint out/checkpoint-N``. rgt restarts such a script after a retryable
failure (preemption, a killed trainer, a lost agent) with its *resume form*:

``--resume-with VALUE``
    a VALUE that starts with ``-`` is ARGS, appended to the original command
    (``--resume-with '--init_from=resume'``); any other VALUE is a whole command
    (``--resume-with 'python train.py --resume_from_checkpoint {ckpt}'``). Both are split
    the way a POSIX shell splits words (``shlex``); nothing is run through a shell.
    ``{ckpt}`` in any word is replaced by the chosen checkpoint's absolute path; the same
    path is exported as ``RGT_RESUME_FROM``. For ``key=value`` overrides (Hydra) give the
    whole command.
``--ckpt GLOB``
    where the script's checkpoints appear: relative to the job's working directory (files
    the job wrote there, never files that came with the code) or to ``RGT_CKPT_DIR``, or
    absolute; ``**`` matches any depth. The newest complete match is chosen: temp files
    (``.tmp-*``, ``*.part``, ``*.tmp``) and empty files never count; a matching directory
    counts when it holds a non-empty file (and, for Hugging Face ``checkpoint-N`` folders,
    its ``trainer_state.json``).

spec.json carries them as ``"resume": {"with": VALUE, "ckpt": GLOB}`` (either key may be
missing); the agent (``rgt.agent._resume``) picks the form at every restart and says so.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping

from rgt.errors import SpecError, UsageError

CKPT_PLACEHOLDER = "{ckpt}"


def resume_spec(resume_with: str | None, ckpt: str | None) -> dict[str, str] | None:
    """The spec.json ``resume`` field for ``--resume-with``/``--ckpt``; None when neither."""
    spec: dict[str, str] = {}
    if resume_with is not None:
        spec["with"] = _checked_form(resume_with)
    if ckpt is not None:
        spec["ckpt"] = _checked_glob(ckpt)
    return spec or None


def for_cell(resume: dict[str, str] | None, values: Mapping[str, object]) -> dict[str, str] | None:
    """A sweep cell's resume form: ``{key}`` placeholders of the cell filled in, ``{ckpt}``
    left for the agent."""
    if not resume or "with" not in resume:
        return resume
    marker = "\0rgt-ckpt\0"
    text = resume["with"].replace(CKPT_PLACEHOLDER, marker)
    try:
        filled = text.format_map(dict(values)).replace(marker, CKPT_PLACEHOLDER)
    except (KeyError, ValueError, IndexError) as exc:
        raise UsageError(
            f"resume_with {resume['with']!r}: {exc}",
            fix="use {key} of grid/cells, {seed}, {cell_id} or {ckpt}; a literal brace is {{",
        ) from exc
    return {**resume, "with": filled}


def _checked_form(value: str) -> str:
    try:
        words = shlex.split(value)
    except ValueError as exc:
        raise UsageError(
            f"--resume-with {value!r} cannot be split into words: {exc}",
            fix="quote it once for your shell, e.g. --resume-with '--init_from=resume'",
        ) from exc
    if not words:
        raise UsageError(
            "--resume-with is empty",
            fix="give ARGS to append (--resume-with '--init_from=resume') or a whole command",
        )
    return value


def _checked_glob(value: str) -> str:
    if not value.strip():
        raise UsageError(
            "--ckpt is empty", fix="give the glob of the script's checkpoints, e.g. 'out/ckpt.pt'"
        )
    return value


def from_sweep_table(where: str, data: Mapping[str, object]) -> dict[str, str] | None:
    """The sweep file's ``resume_with = "…"`` and ``ckpt = "…"`` keys (strings)."""
    values: dict[str, str | None] = {}
    for key in ("resume_with", "ckpt"):
        value = data.get(key)
        if value is not None and not isinstance(value, str):
            raise SpecError(
                f"{where}: '{key}' is {value!r}",
                path=where,
                field=key,
                fix=f'a string, e.g. {key} = "{SWEEP_EXAMPLES[key]}"',
            )
        values[key] = value
    try:
        return resume_spec(values["resume_with"], values["ckpt"])
    except UsageError as exc:
        key = "resume_with" if "resume-with" in exc.message else "ckpt"
        raise SpecError(f"{where}: {exc.message}", path=where, field=key, fix=exc.fix) from exc


SWEEP_EXAMPLES = {"resume_with": "--init_from=resume", "ckpt": "out/ckpt.pt"}
