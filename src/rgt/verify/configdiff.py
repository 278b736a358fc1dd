"""What differs between two groups of runs besides the seed.

An ablation changes one variable. When the groups differ in two keys (say ``lr`` and
``augment``) the delta cannot be attributed to either, and when runs inside one group differ in
a key besides the seed they are not replications of one configuration. Keys that name where a
run writes (``output_dir``, ``run_name``) always differ and are ignored.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

_SEED = re.compile(r"(^|[_.-])seed\Z")
_BOOKKEEPING = frozenset(
    {
        "output_dir",
        "out_dir",
        "outdir",
        "log_dir",
        "logdir",
        "save_dir",
        "ckpt_dir",
        "checkpoint_dir",
        "run_dir",
        "run_name",
        "run_id",
        "exp_name",
        "experiment_name",
        "name",
        "wandb_run_name",
        "tags",
        "notes",
    }
)

MISSING = "<absent>"


@dataclass(frozen=True)
class ConfigDiff:
    changed: dict[str, tuple[list[str], list[str]]]  # key -> (values in A, values in B)
    varies_in_a: tuple[str, ...]  # keys (besides the seed) that differ between runs of A
    varies_in_b: tuple[str, ...]

    @property
    def changed_keys(self) -> list[str]:
        return sorted(self.changed)


def flatten(config: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """Nested config -> {"model.depth": "4", ...}; values as canonical JSON so 1 != "1"."""
    flat: dict[str, str] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            flat.update(flatten(value, f"{name}."))
        else:
            flat[name] = json.dumps(value, sort_keys=True, default=str)
    return flat


def _ignored(key: str) -> bool:
    last = key.rsplit(".", 1)[-1].lower()
    return bool(_SEED.search(last)) or last in _BOOKKEEPING


def _values(flats: Sequence[dict[str, str]], key: str) -> list[str]:
    return sorted({flat.get(key, MISSING) for flat in flats})


def _varying(flats: Sequence[dict[str, str]], keys: Iterable[str]) -> tuple[str, ...]:
    return tuple(key for key in keys if len(_values(flats, key)) > 1)


def diff_configs(a: Sequence[Mapping[str, Any]], b: Sequence[Mapping[str, Any]]) -> ConfigDiff:
    flat_a, flat_b = [flatten(c) for c in a], [flatten(c) for c in b]
    keys = sorted({k for f in [*flat_a, *flat_b] for k in f if not _ignored(k)})
    changed = {}
    for key in keys:
        values_a, values_b = _values(flat_a, key), _values(flat_b, key)
        if values_a != values_b:
            changed[key] = (values_a, values_b)
    return ConfigDiff(changed, _varying(flat_a, keys), _varying(flat_b, keys))
