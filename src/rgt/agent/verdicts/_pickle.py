"""Read a pickle from a machine without running its code.

Unpickling calls whatever a pickle names: ``os.system``, a class's ``__setstate__``, a
``__reduce__`` of the attacker's choosing. So a pickle is never loaded with real globals here.
First its opcodes are walked (``pickletools.genops``) with a model of the pickle stack and memo,
so that every global it names is known, ``STACK_GLOBAL``'s operands included, whether pushed
as strings or fetched from the memo. A global outside the allow-list of data types
(``_allowed``) makes the file ``hash_only``, with the name in the reason. Only a pickle whose
every global is data is then read, by an ``Unpickler`` whose ``find_class`` returns rgt's own
stand-ins (``_stubs``), never the named object: the result is a skeleton of dicts, lists,
numbers and references to tensor storages, enough to know every tensor's key path.
"""

from __future__ import annotations

import io
import pickle
import pickletools
from typing import Any, Callable, Dict, List, Optional

from rgt.agent.verdicts import _allowed, _stubs
from rgt.agent.verdicts._records import Bad, HashOnly

_MARK = object()
_STRING_OPS = frozenset(
    {"STRING", "BINSTRING", "SHORT_BINSTRING", "UNICODE", "BINUNICODE", "SHORT_BINUNICODE"}
) | {"BINUNICODE8"}
_PUT_OPS = frozenset({"PUT", "BINPUT", "LONG_BINPUT"})
_GET_OPS = frozenset({"GET", "BINGET", "LONG_BINGET"})
_EXT_OPS = frozenset({"EXT1", "EXT2", "EXT4"})


def globals_of(data: bytes) -> List[str]:
    """Every global the pickle names, as ``module.qualname``, in order of appearance.

    Raises ``Bad`` for a pickle that ends early or is malformed."""
    stack: List[Any] = []
    memo: Dict[Any, Any] = {}
    names: List[str] = []
    try:
        for op, arg, _ in pickletools.genops(data):
            _step(op, arg, stack, memo, names)
    except (ValueError, IndexError, KeyError) as exc:
        raise Bad("malformed or truncated pickle: %s" % exc) from exc
    return names


def _step(op: Any, arg: Any, stack: List[Any], memo: Dict[Any, Any], names: List[str]) -> None:
    name = op.name
    if name in _PUT_OPS:
        memo[arg] = stack[-1]
    elif name == "MEMOIZE":
        memo[len(memo)] = stack[-1]
    elif name in _GET_OPS:
        stack.append(memo[arg])
    elif name in _STRING_OPS:
        stack.append(arg if isinstance(arg, str) else None)
    elif name in ("GLOBAL", "INST"):
        names.append(".".join(str(arg).split(" ", 1)))
        _generic(op, stack)
    elif name == "STACK_GLOBAL":
        qualname, module = stack.pop(), stack.pop()
        if not isinstance(module, str) or not isinstance(qualname, str):
            names.append("<a STACK_GLOBAL whose name is computed>")
        else:
            names.append(module + "." + qualname)
        stack.append(None)
    elif name in _EXT_OPS:
        names.append("<copyreg extension %s>" % arg)
        stack.append(None)
    elif name == "DUP":
        stack.append(stack[-1])
    else:
        _generic(op, stack)


def _generic(op: Any, stack: List[Any]) -> None:
    """Apply an opcode's documented stack effect (pickletools' stack_before/after)."""
    before, after = op.stack_before, op.stack_after
    if pickletools.markobject in before:
        while stack.pop() is not _MARK:
            pass
        for _ in range(before.index(pickletools.markobject)):
            stack.pop()
    else:
        for _ in before:
            stack.pop()
    for item in after:
        stack.append(_MARK if item is pickletools.markobject else None)


def check_globals(data: bytes) -> List[str]:
    """The globals of ``data``; ``HashOnly`` naming the first that is not known data."""
    names = globals_of(data)
    code = [n for n in dict.fromkeys(names) if not _allowed.is_data(n)]
    if code:
        more = " (and %d more)" % (len(code) - 1) if len(code) > 1 else ""
        raise HashOnly("the pickle names code: %s%s" % (code[0], more))
    return names


class _SkeletonUnpickler(pickle.Unpickler):
    """Returns rgt's stand-ins for allowed globals and refuses everything else."""

    def __init__(self, data: bytes, persistent: Optional[Callable[[Any], Any]]) -> None:
        super().__init__(io.BytesIO(data))
        self._persistent = persistent

    def find_class(self, module: str, name: str) -> Any:
        stub = _stubs.stub_for(module + "." + name)
        if stub is None:  # the opcode walk should have caught it; refuse regardless
            raise HashOnly("the pickle names code: %s.%s" % (module, name))
        return stub

    def persistent_load(self, pid: Any) -> Any:
        if self._persistent is None:
            raise Bad("a persistent reference (%r) in a plain pickle" % (pid,))
        return self._persistent(pid)


def skeleton(data: bytes, persistent: Optional[Callable[[Any], Any]] = None) -> Any:
    """The pickle's structure with stand-ins; ``HashOnly`` or ``Bad`` when it cannot be read."""
    check_globals(data)
    try:
        return _SkeletonUnpickler(data, persistent).load()
    except (HashOnly, Bad):
        raise
    except RecursionError as exc:
        raise HashOnly("the pickle nests too deeply to read safely") from exc
    except Exception as exc:  # a malformed pickle raises almost anything
        raise Bad("pickle does not load: %s: %s" % (type(exc).__name__, exc)) from exc
