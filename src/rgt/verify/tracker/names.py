"""What a run's name claims about its config: ``lr=0.1``, ``lr-0.1``, ``lr3e-4``, ``bs64``.

Runs are compared by name in tables and plots, so a name that says ``lr3e-4`` on a run whose
config says ``lr=1e-3`` puts a number in the wrong row. Only tokens whose key matches a config
key (directly, by its last dotted component, or through a common abbreviation) are compared;
``resnet50`` claims nothing unless the config has a ``resnet`` key.
"""

from __future__ import annotations

import math
import re
from typing import Any

# key=value with any value (strings included); the value ends at a separator or "-key".
_EXPLICIT = re.compile(r"(?<![A-Za-z0-9])([A-Za-z][\w.]*?)=([^\s,/|+=]+?)(?=$|[\s,/|+]|-[A-Za-z])")
# key, optional separator, then a number: lr0.1, lr-0.1, lr_3e-4, bs64, seed1.
_IMPLICIT = re.compile(
    r"(?<![A-Za-z])([A-Za-z][A-Za-z]*?)[-_:]?(\d+\.?\d*(?:[eE]-?\d+)?|\.\d+(?:[eE]-?\d+)?)(?![\d.])"
)

# Abbreviations seen in run names → the config key's last component.
ALIASES: dict[str, tuple[str, ...]] = {
    "lr": ("lr", "learning_rate", "learningrate"),
    "bs": ("batch_size", "bs", "batchsize"),
    "wd": ("weight_decay", "wd"),
    "ep": ("epochs", "num_epochs", "max_epochs", "n_epochs"),
    "epoch": ("epochs", "num_epochs", "max_epochs", "n_epochs"),
    "epochs": ("epochs", "num_epochs", "max_epochs", "n_epochs"),
    "seed": ("seed", "random_seed", "rng_seed", "manual_seed"),
    "s": ("seed",),
    "do": ("dropout",),
    "drop": ("dropout",),
    "steps": ("steps", "max_steps", "num_steps", "total_steps"),
}


def name_claims(name: str) -> dict[str, str]:
    """Every ``key → value`` token in a run name, as written (values still text)."""
    claims = {key.lower(): value for key, value in _EXPLICIT.findall(name)}
    rest = _EXPLICIT.sub(" ", name)
    for key, value in _IMPLICIT.findall(rest):
        claims.setdefault(key.lower(), value)
    return claims


def config_key(claim: str, config: dict[str, Any]) -> str | None:
    """The config key a name token refers to, or None when the config has no such key."""
    wanted = ALIASES.get(claim, (claim,))
    for key in config:
        last = key.lower().rsplit(".", 1)[-1]
        if key.lower() == claim or last in wanted:
            return key
    return None


def agrees(claimed: str, actual: Any) -> bool:
    if isinstance(actual, bool) or not isinstance(actual, (int, float)):
        return claimed.lower() == str(actual).lower()
    try:
        value = float(claimed)
    except ValueError:
        return False
    return math.isclose(value, float(actual), rel_tol=1e-6, abs_tol=1e-12)


def mismatches(name: str, config: dict[str, Any]) -> dict[str, tuple[str, Any]]:
    """Config keys whose value the name contradicts: ``{key: (name says, config says)}``."""
    found: dict[str, tuple[str, Any]] = {}
    for claim, value in name_claims(name).items():
        key = config_key(claim, config)
        if key is not None and not agrees(value, config[key]):
            found[key] = (value, config[key])
    return found
