"""Why a resume was not exact: the first tensor or key where the resumed run's final state
differs from the uninterrupted run's, and the likely cause in the script, with the fix.

Both final rgt.ckpt checkpoints of `rgt smoke` are loaded here (the user's own run on this
computer, in rgt's data-only format) and walked in the order they were saved. The causes are
read from the script and the local modules it imports (never run): a ``DataLoader`` that
shuffles with the global RNG (no ``generator=``), a learning-rate scheduler that is used but
not in the checkpoint, dropout. RNG or generator state that differs names itself.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MAX_FILES = 100
RNG = re.compile(r"(?i)\brng\b|generator|random|rng_state")


@dataclass(frozen=True)
class Difference:
    first: str  # "lightning.state_dict.layer.weight: tensor values differ (max |diff| 0.0123)"
    count: int  # how many leaves differ
    causes: tuple[dict[str, str], ...]  # {"cause", "fix", "where"}

    def sentence(self) -> str:
        said = f"first difference: {self.first}"
        said += f" ({self.count - 1} more differing entries)" if self.count > 1 else ""
        for cause in self.causes[:2]:
            said += f"; likely cause: {cause['cause']} ({cause['where']}): {cause['fix']}"
        return said


def explain(
    uninterrupted: Path, resumed: Path, command: Sequence[str], source: Path
) -> Difference | None:
    """The difference between the final checkpoints in the two rgt.ckpt directories."""
    from rgt.ckpt import Checkpointer

    try:
        first = Checkpointer(str(uninterrupted)).load_latest(map_location="cpu")
        second = Checkpointer(str(resumed)).load_latest(map_location="cpu")
    except Exception:  # an unreadable state is reported by the verdict itself
        return None
    found = list(differences(first, second, ""))
    if not found:
        return None
    # A weight, buffer or optimizer moment that differs says more than the RNG states that
    # differ with it; an RNG state alone means the next random draws will.
    found.sort(key=lambda f: bool(RNG.search(f.split(":")[0])))
    saved = {path for path, _ in _leaves(first, "")}
    return Difference(found[0], len(found), tuple(causes(command, source, found, saved)))


def differences(a: Any, b: Any, path: str) -> Iterator[str]:
    """Each differing leaf, as ``path: what``, in the saved order."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in list(a) + [k for k in b if k not in a]:
            where = f"{path}.{key}" if path else str(key)
            if key not in b or key not in a:
                yield f"{where}: saved by the {'uninterrupted' if key in a else 'resumed'} run only"
            else:
                yield from differences(a[key], b[key], where)
    elif isinstance(a, list | tuple) and isinstance(b, list | tuple) and len(a) == len(b):
        for index, (x, y) in enumerate(zip(a, b, strict=True)):
            yield from differences(x, y, f"{path}[{index}]")
    else:
        what = _leaf_difference(a, b)
        if what:
            yield f"{path}: {what}"


def _leaf_difference(a: Any, b: Any) -> str | None:
    import torch

    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        if a.shape != b.shape or a.dtype != b.dtype:
            return f"tensor {tuple(a.shape)} {a.dtype} vs {tuple(b.shape)} {b.dtype}"
        if torch.equal(a, b):
            return None
        if a.is_floating_point():
            return f"tensor values differ (max |diff| {float((a - b).abs().max()):.3g})"
        return "tensor values differ"
    if hasattr(a, "shape") and hasattr(b, "shape"):  # numpy
        import numpy

        return None if numpy.array_equal(a, b) else "array values differ"
    return None if a == b else f"{_short(a)} vs {_short(b)}"


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _leaves(obj: Any, path: str) -> Iterator[tuple[str, Any]]:
    if isinstance(obj, dict):
        for key, value in obj.items():
            yield from _leaves(value, f"{path}.{key}" if path else str(key))
    else:
        yield path, obj


def causes(
    command: Sequence[str], source: Path, found: list[str], saved: set[str]
) -> Iterator[dict[str, str]]:
    trees = list(_script_trees(command, source))
    if RNG.search(found[0].split(":")[0]):
        yield {
            "cause": "weights and optimizer state are equal, but a random-number state differs, "
            "so the next random draws (dropout, augmentation, the next shuffle) will too",
            "where": found[0].split(":")[0],
            "fix": "draw random numbers only from states the checkpoint restores (rgt.ckpt "
            "capture_rng/restore_rng; a loader's own generator=), not in hooks between saves",
        }
    for name, tree in trees:
        for node in ast.walk(tree):
            if _shuffles_globally(node):
                yield {
                    "cause": "a DataLoader shuffles with the global RNG (no generator=), so "
                    "the resumed epoch draws another order",
                    "where": f"{name}:{getattr(node, 'lineno', '?')}",
                    "fix": "give it its own: DataLoader(..., shuffle=True, "
                    "generator=torch.Generator().manual_seed(SEED)); rgt saves and restores "
                    "a loader's own generator",
                }
    if _uses(trees, r"lr_scheduler|Scheduler\(") and not any("sched" in s.lower() for s in saved):
        yield {
            "cause": "a learning-rate scheduler is used but not in the checkpoint",
            "where": "no 'scheduler' key in the saved state",
            "fix": "save it with the rest: TrainLoop(scheduler=...), or return it from "
            "configure_optimizers (Lightning)",
        }
    if _uses(trees, r"Dropout\(|\.dropout\(|dropout="):
        yield {
            "cause": "dropout draws from the global RNG",
            "where": "the model",
            "fix": "restore the RNG with the checkpoint and save between steps (rgt.ckpt "
            "does both); or compare in eval mode",
        }


def _shuffles_globally(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    name = getattr(node.func, "attr", None) or getattr(node.func, "id", None)
    words = {k.arg: k.value for k in node.keywords}
    shuffle = words.get("shuffle")
    shuffled = isinstance(shuffle, ast.Constant) and shuffle.value is True
    return name == "DataLoader" and shuffled and "generator" not in words and "sampler" not in words


def _uses(trees: list[tuple[str, ast.AST]], pattern: str) -> bool:
    return any(re.search(pattern, ast.unparse(tree)) for _, tree in trees)


def _script_trees(command: Sequence[str], source: Path) -> Iterator[tuple[str, ast.AST]]:
    """The script's AST and those of the local modules it imports, by file name."""
    queue = [Path(word) for word in command if word.endswith(".py")]
    seen: set[Path] = set()
    while queue and len(seen) < MAX_FILES:
        path = source / queue.pop(0)
        if path in seen or not path.is_file():
            continue
        seen.add(path)
        try:
            tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
        except (SyntaxError, ValueError):
            continue
        yield path.name, tree
        for node in ast.walk(tree):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names = [node.module]
            queue += [Path(*n.split(".")).with_suffix(".py") for n in names]
