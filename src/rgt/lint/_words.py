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
from collections.abc import Mapping, Sequence

from rgt.lint._run import LOCAL, SPELLED
from rgt.lint._source import Text
from rgt.lint.modes import BELOW, LAYER_WORDS

WORD_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
# String literals and comments: their words ("resume" in a help text) are not code.
NOT_CODE = re.compile(r'"""[\s\S]*?"""|\'\'\'[\s\S]*?\'\'\'|"[^"\n]*"|\'[^\'\n]*\'|#[^\n]*')
CUDA_STRING = re.compile(r"[\"']cuda")  # torch.device("cuda:0")


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
    most files never need their strings cut."""
    found: set[str] = set()
    candidates = [word for word in SPELLED if word not in known and word in code]
    if candidates:
        bare = NOT_CODE.sub(" ", code)
        found = {w for w in candidates if _spells(bare, w)}
    if "cuda" not in found and "cuda" not in known and CUDA_STRING.search(code):
        found.add("cuda")
    return found


def _spells(code: str, word: str) -> bool:
    """Is ``word`` in ``code`` as a whole identifier ("cuda", not "cudnn_cuda")? A find loop:
    ~40x faster than a regex with lookarounds, which cannot skip ahead to the word."""
    at = code.find(word)
    while at != -1:
        end = at + len(word)
        if (at == 0 or code[at - 1] not in WORD_CHARS) and code[end : end + 1] not in WORD_CHARS:
            return True
        at = code.find(word, end)
    return False
