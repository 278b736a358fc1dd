"""The project words the rules ask about, and how far each one is looked for.

A rule asks two kinds of question about the code around a file. "Is ``set_epoch`` called
anywhere?", "does anything load a checkpoint?": a yes holds a finding back, so the word is
looked for in every file read (found in an unrelated script, it only costs a finding). "Does
the model have dropout?", "does this code run on a GPU?": a yes lets a finding through, so the
word is looked for only in the file's own code, the files linked to it by local imports (either
way). A folder of unrelated examples then lends no example another one's dropout layers.
The layer words the file and the modules it imports name (however deep, not its importers)
come too, prefixed ``modes.BELOW``: what a model class defined in the file can be built of.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Mapping, Sequence

from rgt.lint._run import LOCAL, SPELLED
from rgt.lint._source import Text
from rgt.lint.modes import BELOW, LAYER_WORDS

WORD_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
# String literals and comments: their words ("resume" in a help text) are not code.
NOT_CODE = re.compile(r'"""[\s\S]*?"""|\'\'\'[\s\S]*?\'\'\'|"[^"\n]*"|\'[^\'\n]*\'|#[^\n]*')
CUDA_STRING = re.compile(r"[\"']cuda")  # torch.device("cuda:0")
# Each word the rules ask about (shortest first), with the shorter ones it holds ("Dropout" in
# "Dropout2d"): when a file lacks one of those, it lacks the word too.
BY_LENGTH = tuple(
    (w, frozenset(o for o in SPELLED if o != w and o in w)) for w in sorted(SPELLED, key=len)
)


class Words:
    """Each file's words: those found anywhere (looked for here, once, for every file), with
    the ``LOCAL`` ones (``_run``) as found in its own group of files (``links``: path → paths
    it imports), looked for when first asked, by the process that asks (without the cache, a
    forked child: the cut of strings and comments they need is most of the cost)."""

    def __init__(self, texts: Sequence[Text], links: Mapping[str, Sequence[str]]) -> None:
        self.texts = {t.path: t for t in texts}
        self.members: dict[str, list[str]] = {}
        for path, root in _groups(list(self.texts), links).items():
            self.members.setdefault(root, []).append(path)
        self.group = {path: root for root, paths in self.members.items() for path in paths}
        self.anywhere: set[str] = set()
        for text in texts:
            self.anywhere |= identifiers(text.text, LOCAL | self.anywhere)
        self.links = links
        self._local: dict[str, frozenset[str]] = {}
        self._mentions: dict[str, frozenset[str]] = {}

    def __call__(self, path: str) -> frozenset[str]:
        root = self.group[path]
        if root not in self._local:
            found: set[str] = set()
            for other in self.members[root]:
                found |= identifiers(self.texts[other].text, (SPELLED - LOCAL) | found)
            self._local[root] = frozenset(self.anywhere | found)
        group = self._local[root]
        return group | {BELOW + w for w in self._below(path, group & LAYER_WORDS)}

    def _below(self, path: str, wanted: frozenset[str]) -> set[str]:
        """Of the ``wanted`` layer words, those the file or the modules it imports (however
        deep) mention. Mentioned, not spelled as code: a word in a string counts too, which
        only keeps a finding (and the search cheap: no cut of strings and comments)."""
        found: set[str] = set()
        seen, queue = {path}, [path]
        while queue and found != wanted:
            current = queue.pop()
            if current not in self._mentions:
                code = self.texts[current].text
                self._mentions[current] = frozenset(w for w in LAYER_WORDS if w in code)
            found |= self._mentions[current] & wanted
            fresh = [p for p in self.links.get(current, ()) if p in self.texts and p not in seen]
            seen.update(fresh)
            queue.extend(fresh)
        return found


def _groups(paths: list[str], links: Mapping[str, Sequence[str]]) -> dict[str, str]:
    """Each path's group (named by one of its paths): files joined by imports either way."""
    root = {path: path for path in paths}

    def find(path: str) -> str:
        while root[path] != path:
            root[path] = root[root[path]]
            path = root[path]
        return path

    for path in paths:
        for other in links.get(path, ()):
            if other in root:
                root[find(path)] = find(other)
    return {path: find(path) for path in paths}


def identifiers(code: str, known: set[str] | frozenset[str] = frozenset()) -> set[str]:
    """The words the rules ask about (``_run.SPELLED``) that a file's code spells (not its
    strings or comments), and "cuda" when a string names the device; words already ``known``
    are not looked for again. A word that is not even a substring of the file costs nothing:
    most files never need their strings found."""
    found: set[str] = set()
    absent: set[str] = set()
    candidates = []
    for word, inside in BY_LENGTH:  # a word that holds an absent one is absent too
        if word in known or (inside and not absent.isdisjoint(inside)):
            continue
        if word in code:
            candidates.append(word)
        else:
            absent.add(word)
    if candidates:
        outside = _Outside(code)
        found = {w for w in candidates if _spells(code, w, outside)}
    if "cuda" not in found and "cuda" not in known and _quoted_cuda(code):
        found.add("cuda")
    return found


def _quoted_cuda(code: str) -> bool:
    """``CUDA_STRING.search(code)``, by finding "cuda" (a quote before it): the regex tries
    every position of the file, the find skips to the few where the word is."""
    at = code.find("cuda")
    while at != -1:
        if at and code[at - 1] in "\"'":
            return True
        at = code.find("cuda", at + 1)
    return False


def _spells(code: str, word: str, outside: _Outside) -> bool:
    """Is ``word`` in ``code`` as a whole identifier ("cuda", not "cudnn_cuda"), outside its
    strings and comments? A find loop: ~40x faster than a regex with lookarounds, which cannot
    skip ahead to the word. (A string or comment starts and ends with a quote, ``#`` or a line's
    end, never a word's letter: no occurrence straddles one, and its neighbours are the same
    whether the string is there or cut out.)"""
    at = code.find(word)
    while at != -1:
        end = at + len(word)
        alone = code[end : end + 1] not in WORD_CHARS
        if alone and (at == 0 or code[at - 1] not in WORD_CHARS) and outside(at):
            return True
        at = code.find(word, end)
    return False


class _Outside:
    """Is a position of ``code`` outside its strings and comments (``NOT_CODE``)? They are
    found from the start only as far as asked: a word spelled in code is usually met long
    before the end of the file, so most of it is never scanned."""

    def __init__(self, code: str) -> None:
        self.found = NOT_CODE.finditer(code)
        self.starts: list[int] = []
        self.ends: list[int] = []
        self.done = False

    def __call__(self, at: int) -> bool:
        while not self.done and (not self.starts or self.starts[-1] <= at):
            match = next(self.found, None)
            if match is None:
                self.done = True
            else:
                self.starts.append(match.start())
                self.ends.append(match.end())
        index = bisect_right(self.starts, at) - 1
        return index < 0 or at >= self.ends[index]
