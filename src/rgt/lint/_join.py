"""Findings that span files: what one module uses, matched with what another offers.

Each module's summary (``_cross``) lists what it offers and what it uses; here the uses are
resolved through the project's imports (``_project``) and matched. Every finding says what it
followed, with the file and line of each end: "Dataset `ListDataset` (utils/datasets.py:22)
draws from NumPy's global RNG ...; DataLoader here has `opt.n_cpu` workers and no
worker_init_fn". The work is a few dictionary lookups per use: no file is parsed again.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from collections.abc import Set as AbstractSet
from typing import Any

from rgt.lint import _join_data, _join_losses, _join_modes, _join_order
from rgt.lint._flow_modes import HELD
from rgt.lint._join_base import Site, callee, lookup_class, show, through
from rgt.lint._model import Finding, Rule, detail_of, lint_finding
from rgt.lint._project import Project, Summary
from rgt.lint._source import Text
from rgt.lint.modes import LAYER_WORDS, TORCHVISION_NORMED


def findings(
    texts: Mapping[str, Text],
    summaries: Mapping[str, Summary],
    words: Callable[[str], frozenset[str]],
    rules: Mapping[str, Rule],
    wanted: frozenset[str],
    reached: set[tuple[str, str]] | None = None,
) -> list[Finding]:
    """The cross-file findings of the files summarised (each site once, noqa respected);
    ``reached`` gets (file, function name) of each evaluation function a finding reaches in
    training mode (``withheld``: its own single-file finding says less)."""
    project = Project(summaries, texts)
    seen: set[tuple[str, int, str]] = set()
    out = []
    for path, line, col, code, detail in _sites(project, texts, words, reached):
        key = (path, line, code)
        if code not in wanted or key in seen or _silenced(summaries[path], line, code):
            continue
        seen.add(key)
        text = texts.get(path)
        cell, where = (None, line)
        if text is not None and text.cells and 0 < line <= len(text.cells):
            cell, where = text.cells[line - 1]
        out.append(lint_finding(path, where, col + 1, rules[code], detail, cell))
    return out


def withheld(
    findings: list[Finding], project: Project, reached: AbstractSet[tuple[str, str]] = frozenset()
) -> list[Finding]:
    """The single-file findings less each RGT201 on an evaluation function (it never calls
    ``.eval()``, nor does its module) that the project calls only from other files, every
    call right after putting the model it passes in eval mode: the callers own the mode. Nor
    one on a function a cross-file finding already reaches (``reached``): that one says
    from where, in what mode."""
    uses: dict[tuple[str, str], list[bool]] = {}
    for path, summary in project.summaries.items():
        for _line, ref, evaluating in summary.get("eval_uses", ()):
            target = callee(project, path, ref)
            if target is not None:
                uses.setdefault(target, []).append(evaluating and target[0] != path)
    covered = set(reached)
    covered |= {
        (where, qual.rpartition(".")[2]) for (where, qual), seen in uses.items() if all(seen)
    }
    own = _own_schedules(project)
    kept = [f for f in findings if f.code != "RGT106" or (f.path, f.line) not in own]
    return [f for f in kept if f.code != "RGT201" or (f.path, detail_of(f)) not in covered]


def _own_schedules(project: Project) -> set[tuple[str, int]]:
    """(file, line) of each scheduler step whose scheduler is built from a class of the
    project with a ``step`` of its own (``_flow._own_step``): when it sets the rate is its
    own, not torch's order (RGT106 does not apply)."""
    out = set()
    for path, summary in project.summaries.items():
        for line, spelled in summary.get("sched_ctors", ()):
            found = lookup_class(project, path, spelled)
            if found is not None and found[2].get("own_step"):
                out.add((path, line))
    return out


def _silenced(summary: Summary, line: int, code: str) -> bool:
    codes = summary.get("noqa", {}).get(str(line))
    return codes is not None and (not codes or code in codes)


def _layers(
    project: Project,
    texts: Mapping[str, Text],
    words: Callable[[str], frozenset[str]],
    path: str,
) -> bool:
    """Can the models ``path`` runs have dropout or batch-norm: its linked files name one
    (``_words``), or a file within two imports (``Project.neighbours``) mentions one."""
    if words(path) & LAYER_WORDS:
        return True
    near = [texts[n].text for n in project.neighbours(path) if n in texts]
    return any(w in text for text in near for w in LAYER_WORDS) or any(
        TORCHVISION_NORMED.search(text) for text in near
    )


def _sites(
    project: Project,
    texts: Mapping[str, Text],
    words: Callable[[str], frozenset[str]],
    reached: set[tuple[str, str]] | None = None,
) -> Iterator[Site]:
    def layers(path: str) -> bool:
        return _layers(project, texts, words, path)

    stepping = _join_order.stepping_methods(project)
    for path, summary in project.summaries.items():
        yield from _join_losses.sites(project, path, summary)
        yield from _join_order.sites(project, path, summary, stepping)
        yield from _evaluations(project, path, summary, layers, reached)
        if summary.get("ctor_calls") and layers(path):
            yield from _join_modes.sites(project, path, summary)
        if summary.get("eval_made") and layers(path):
            yield from _join_modes.made_in_eval(project, path, summary)
        yield from _left_in_eval(project, path, summary, layers)
        yield from _join_data.sites(project, path, summary)
        yield from _steppers(project, path, summary)
    if not any("set_epoch" in words(p) for p in list(project.summaries)[:1]) or not _sets_epoch(
        texts
    ):
        yield from _samplers(project)


# ``set_epoch`` other than in its definition: a call, ``hasattr(x, "set_epoch")``, a comment
SET_EPOCH_USE = re.compile(r"(?<!def )\bset_epoch\b")


def _sets_epoch(texts: Mapping[str, Text]) -> bool:
    """Does any file name ``set_epoch`` other than to define it (2D-TAN's own
    ``DistributedSampler`` defines one that nothing calls)?"""
    return any("set_epoch" in t.text and SET_EPOCH_USE.search(t.text) for t in texts.values())


def _evaluations(
    project: Project,
    path: str,
    summary: Summary,
    layers: Callable[[str], bool],
    reached: set[tuple[str, str]] | None = None,
) -> Iterator[Site]:
    calls = summary.get("runner_calls", ())
    if not calls or not layers(path):
        return
    for line, col, ref, index, _keyword, model, why, looping, built in calls:
        target = callee(project, path, ref)
        runner = (
            project.summaries.get(target[0], {}).get("runners", {}).get(target[1])
            if target
            else None
        )
        if runner is None and target is not None and index == HELD:
            target, runner = _inherited(project, target)
        if runner is not None and not (runner[2] or looping):
            continue  # run once, not batch by batch: not an evaluation seen here
        ran = [n for p, n in runner[1] if p == index and (p >= 0 or n == model)] if runner else []
        through_methods = ran and runner is not None and ran[0] in runner[3]
        if through_methods and built and not _module_class(project, path, built):
            continue  # run through its methods: only a module's count
        if runner is not None and ran and target is not None:
            at = show(target[0], runner[0], path)
            detail = (f"`{target[1]}` ({at}) runs `{ran[0]}` in a loop and never calls "
                      f".eval(); here `{model}` is in training mode: {why}")  # fmt: skip
            if reached is not None:
                reached.add((target[0], target[1].rpartition(".")[2]))
            yield path, line, col, "RGT201", detail


def _left_in_eval(
    project: Project, path: str, summary: Summary, layers: Callable[[str], bool]
) -> Iterator[Site]:
    """A training loop that hands its model to a function in another file which leaves it in
    eval mode, and that no function it calls puts back in training mode (``_flow_leaves``)."""
    for model, handed in summary.get("handed_models", ()):
        left: list[tuple[str, int, int, str, str, str, int]] = []
        for line, col, ref, index, keyword in handed:
            target = callee(project, path, ref)
            if target is None:
                continue
            # what the callee leaves the model in, itself or through the functions (of other
            # files too) it hands the model on to: any "train" among them restores it
            for position, name, where, entry in through(project, *target, "modes_left"):
                if position == index or name == keyword:
                    qual = _qual(project, where, entry)
                    via = f", reached through `{target[1]}`," if qual != target[1] else ""
                    left.append((entry[2], line, col, where, qual, via, entry[3]))
        if any(mode == "train" for mode, *_ in left):
            continue
        for _mode, line, col, where, qual, via, at in left[:1]:
            if where == path or not layers(path):
                continue  # the single-file rule's (``left_in_eval``); or no layer switches
            detail = (f"`{qual}` ({show(where, at, path)}){via} leaves `{model}` in eval "
                      "mode, and nothing in this training loop puts it back in training "
                      "mode")  # fmt: skip
            yield path, line, col, "RGT202", detail


def _qual(project: Project, where: str, entry: list[Any]) -> str:
    """The function of ``where`` whose ``modes_left`` holds ``entry``."""
    modes = project.summaries.get(where, {}).get("modes_left", {})
    return next((q for q, entries in modes.items() if entry in entries), "?")


def _module_class(project: Project, path: str, spelled: str, depth: int = 0) -> bool:
    """Is the class spelled ``spelled`` in ``path`` a project class that derives from
    ``nn.Module`` (through its bases, a few levels)? A class from outside: not known, so no."""
    found = lookup_class(project, path, spelled)
    if found is None or depth > 4:
        return False
    where, _name, entry = found
    for base in entry.get("bases", ()):
        if base.rpartition(".")[2] == "Module" or _module_class(project, where, base, depth + 1):
            return True
    return False


def _inherited(
    project: Project, target: tuple[str, str], depth: int = 0
) -> tuple[tuple[str, str] | None, list[Any] | None]:
    """The evaluation method ``Class.method`` (``target``) inherits from a base class defined
    in another file (robustdg's ``Hybrid(BaseAlgo)`` calling ``get_test_accuracy``): the base's
    runner entry, followed 3 levels up."""
    where, qual = target
    cls, _, name = qual.rpartition(".")
    entry = project.summaries.get(where, {}).get("classes", {}).get(cls, {})
    for base in entry.get("bases", ()) if depth < 3 else ():
        found = project.lookup(where, base)
        if found is None:
            continue
        above = (found[0], f"{found[1]}.{name}")
        runner = project.summaries.get(found[0], {}).get("runners", {}).get(above[1])
        if runner is not None:
            return above, runner
        deeper = _inherited(project, above, depth + 1)
        if deeper[1] is not None:
            return deeper
    return None, None


def _steppers(project: Project, path: str, summary: Summary) -> Iterator[Site]:
    for line, _col, ref in summary.get("step_calls", ()):
        target = callee(project, path, ref)
        step = (
            project.summaries.get(target[0], {}).get("steppers", {}).get(target[1])
            if target
            else None
        )
        if step is not None and target is not None:
            loop = show(path, line, target[0])
            detail = (f"`{target[1]}` steps `{step[2]}` after a backward pass and no zero_grad "
                      f"of its module runs on that path; the loop at {loop} calls it every pass "
                      f"and does not clear them either")  # fmt: skip
            yield target[0], step[0], step[1], "RGT105", detail


def _samplers(project: Project) -> Iterator[Site]:
    """Shuffling DistributedSamplers in a file with no loop that reads a loader again, where a
    file within two imports has one (the single-file rule covers a file with both)."""
    for path, summary in project.summaries.items():
        if not summary.get("samplers") or summary.get("repeats"):
            continue
        for other in project.neighbours(path):
            again = project.summaries.get(other, {}).get("repeats")
            if again:
                for line, col in summary["samplers"]:
                    yield (
                        path,
                        line,
                        col,
                        "RGT302",
                        (
                            f"the loader it feeds is read again and again by {again[1]} at "
                            f"{show(other, again[0], path)}, and nothing calls set_epoch"
                        ),
                    )
                break
