"""Where in a saved structure a value sits, and whether NaN/inf there means broken weights.

The rule (written down in the README, "What `pull` checks"):

- NaN or inf in parameters, buffers and optimizer moments is ``bad``: the run diverged, and a
  checkpoint that loads is still useless.
- NaN or inf in training *metadata* is normal and noted: everything under a section named
  ``callbacks``, ``loops``, ``lr_schedulers``/``lr_scheduler``/``scheduler``, ``scaler``,
  ``grad_scaler``, ``loss_scaler``, ``hyper_parameters``/``hparams``; and a scalar (one value)
  whose own key is ``best_*``, ``kth_*``, ``monitor*``, contains ``score`` or ``metric``, or is
  ``scale``/``_scale``/``cur_scale``/``loss_scale``. Lightning stores ``inf`` as
  ``ModelCheckpoint``'s ``kth_value`` whenever nothing is monitored; a GradScaler's scale may
  be inf for a step.
- A whole file of metadata (``scheduler*.bin``/``.pt``, ``scaler*.pt``, ``rng_state*``,
  ``random_states_*``, ``sampler*``) follows the metadata rule throughout.
"""

from __future__ import annotations

import math
import re
from typing import Any, Iterator, List, Sequence, Tuple

from rgt.agent.verdicts import _stubs

SECTIONS = frozenset(
    {
        "callbacks",
        "loops",
        "lr_schedulers",
        "lr_scheduler",
        "scheduler",
        "schedulers",
        "scaler",
        "grad_scaler",
        "loss_scaler",
        "hyper_parameters",
        "hparams",
        "datamodule_hyper_parameters",
    }
)
_SCALAR_KEYS = re.compile(r"^(best_|kth_|monitor)|score|metric|^_?scale$|^(cur|loss)_scale$")
_METADATA_FILES = re.compile(r"^(scheduler|lr_scheduler|scaler|rng_state|random_states|sampler)")


def metadata_file(name: str) -> bool:
    """A file that holds only training metadata (by its base name)."""
    return bool(_METADATA_FILES.match(name.lower()))


def is_metadata(path: Sequence[str], numel: int) -> bool:
    """Is a value at ``path`` (its keys from the root) metadata, where NaN/inf is normal?"""
    if any(part.lower() in SECTIONS for part in path):
        return True
    return numel <= 1 and bool(path) and bool(_SCALAR_KEYS.search(path[-1].lower()))


Leaf = Tuple[List[str], Any]


def leaves(obj: Any, path: List[str] = []) -> Iterator[Leaf]:  # noqa: B006 - never mutated
    """(key path, value) of every tensor, array, scalar and float in a pickle's skeleton."""
    stack = [(path, obj)]  # iterative: a deep structure must not exhaust the C stack
    seen = set()  # a pickle can hold a container inside itself (through its memo)
    while stack:
        here, node = stack.pop()
        children = _children(node)
        if children is None:
            yield here, node
        elif id(node) not in seen:
            seen.add(id(node))
            stack.extend(([*here, key], child) for key, child in reversed(children))


def _children(node: Any) -> Any:
    if isinstance(node, dict):
        return [(_key(k), v) for k, v in node.items()]
    if isinstance(node, (list, tuple, set, frozenset)):
        return [(str(i), v) for i, v in enumerate(node)]
    if isinstance(node, _stubs.Record):
        fields = node.fields()
        items = list(fields.items()) if fields else []
        return items + [("arg%d" % i, v) for i, v in enumerate(node.args)]
    if isinstance(node, _stubs.ArrayRef) and isinstance(node.raw, list):
        return [(str(i), v) for i, v in enumerate(node.raw)]  # an object array
    return None


def _key(key: Any) -> str:
    return key if isinstance(key, str) else repr(key) if not isinstance(key, int) else str(key)


def nonfinite_float(value: Any) -> bool:
    return isinstance(value, float) and not math.isfinite(value)
