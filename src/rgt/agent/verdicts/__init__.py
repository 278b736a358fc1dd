"""One verifier for a job's artifacts, used by the agent on the machine, by ``pull`` and by
``rgt verify artifacts``, so that "N ok" means the same everywhere. Standard library only, and
Python 3.8 syntax: it is bundled into the agent's zipapp.

``check_file(path, sha256=, size=)`` gives one ``FileVerdict``; ``check_tree(root,
manifest_files)`` every file's, plus one ``UnitVerdict`` per framework checkpoint folder
(accelerate ``save_state``, a transformers ``checkpoint-N``, DeepSpeed, torch DCP, a sharded
``*.index.json``). Nothing read from a machine is ever unpickled with its own globals.
"""

from __future__ import annotations

from rgt.agent.verdicts._file import check_file
from rgt.agent.verdicts._records import (
    BAD,
    HASH_ONLY,
    OK,
    VERDICTS,
    FileVerdict,
    TreeVerdict,
    UnitVerdict,
    say_counts,
)
from rgt.agent.verdicts._tree import check_tree

__all__ = [
    "BAD",
    "HASH_ONLY",
    "OK",
    "VERDICTS",
    "FileVerdict",
    "TreeVerdict",
    "UnitVerdict",
    "check_file",
    "check_tree",
    "say_counts",
]
