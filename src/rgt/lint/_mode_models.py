"""Which models the mode rules speak about (``modes``): a module whose loops a framework runs is
left to it, and a model whose layers cannot behave differently in training and eval mode (no
dropout, no batch norm: coRNN's recurrent cell) may stay in either. A model from a library's
zoo (torchvision's classifiers, timm, a pretrained checkpoint) has such layers."""

from __future__ import annotations

import ast
import re

from rgt.lint._facts import Facts
from rgt.lint._nodes import dotted, method

# torchvision's classifiers built with batch norm (or dropout): ``torchvision.models.resnet18(``
# names no layer, yet the model has dozens (the cross-file evaluation rule, ``_join``).
TORCHVISION_NORMED = re.compile(
    r"\bmodels\.(resnet|resnext|wide_resnet|vgg|densenet|mobilenet|efficientnet|inception"
    r"|googlenet|shufflenet|regnet|mnasnet|alexnet)\w*\("
)
# A layer word as found in the file itself or in the modules it imports, however deep (the
# project words carry it with this prefix, ``_words``): what a model class defined in the file
# can be built of. Its importers' layers are not.
BELOW = "below:"
FRAMEWORKS = ("lightning", "pytorch_lightning", "transformers", "accelerate", "ignite")


def framework_driven(facts: Facts) -> bool:
    """Does a framework run this module's loops (and set the modes)? Lightning, Ignite and
    Accelerate scripts, and Hugging Face code that uses its ``Trainer``; not a module that only
    takes its models from ``transformers`` and trains them in its own loop (small-text's
    ``TransformerBasedClassification``)."""
    for full in facts.aliases.values():
        head = full.split(".")[0]
        if head == "transformers":
            if full.rpartition(".")[2].endswith(("Trainer", "TrainingArguments")):
                return True
            if full == "transformers" and _uses_trainer(facts):
                return True
        elif head in FRAMEWORKS:
            return True
    return False


def _uses_trainer(facts: Facts) -> bool:
    """``transformers.Trainer(...)`` after ``import transformers``."""
    return any((facts.call_name(c) or "").endswith("Trainer") for c in facts.calls)


# Calls that build whole models from a library (their layers are not in the project's text):
# torchvision's classifiers, timm, torch.hub, a pretrained checkpoint's class.
ZOO_CALLS = ("timm.", "pretrainedmodels.", "segmentation_models_pytorch.",
             "efficientnet_pytorch.", "torch.hub.load")  # fmt: skip


def zoo_model(facts: Facts) -> bool:
    """Does the module build a model from a library's zoo (batch norm and dropout inside)?"""
    key = "zoo_model"
    found = facts.memo.get(key)
    if not isinstance(found, bool):
        names = (facts.call_name(c) or "" for c in facts.calls)
        found = facts.memo[key] = any(
            n.startswith(ZOO_CALLS)
            or n.endswith(".from_pretrained")
            or (n.startswith("torchvision.models.") and TORCHVISION_NORMED.search(n[11:] + "("))
            for n in names
        )
    return found


def may_change(facts: Facts, mode_call: ast.AST, words: set[str]) -> bool:
    """Can the model ``mode_call`` (``model.eval()``) switches behave differently in the two
    modes? Not when it is built from a class of this module and neither this file nor what it
    imports names a mode-bound layer (coRNN's recurrent cell: Linear and tanh only, so its
    maintainers leave it in eval mode between tests on purpose). A model from elsewhere (a
    parameter, a library's zoo) may have some."""
    if any(w.startswith(BELOW) for w in words):
        return True
    if zoo_model(facts):
        return True
    classes = {c.name for c in facts.classes}
    built = _built_by(facts, mode_call)
    return not built or not built <= classes


def _built_by(facts: Facts, mode_call: ast.AST) -> set[str]:
    """The classes or functions the object ``x.eval()`` acts on was made by, as bound in the
    call's function or at module level (empty: not known)."""
    owner = mode_call.func.value if method(mode_call) else None  # type: ignore[attr-defined]
    key = dotted(owner) if owner is not None else None
    if key is None:
        return set()
    if "." not in key:
        inner = facts.scope_of(mode_call)
        line: int = mode_call.lineno  # type: ignore[attr-defined]
        # A function runs when called: after every module-level binding, as a rule.
        outer = line if inner is facts.tree else 1 << 30
        for scope, before in ((inner, line), (facts.tree, outer)):
            value = facts.last_value(scope, key, before)
            if value is not None:
                made = facts.construction(value)
                return {made} if made else set()
    names = facts.bound_calls(key)
    values = facts.bindings.get(key, [])
    return set(names) if names and len(names) == len(values) else set()
