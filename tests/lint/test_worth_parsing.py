"""Files that no rule can find anything in are not parsed (``_run.worth_parsing``).

Every snippet of the rule tests is also linted with every file parsed (``_lint.found``); these
tests add real repositories' files and the spellings a plain text search could miss.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from unittest import mock

from rgt.lint import _run, lint_paths
from tests.lint._lint import found
from tests.lint.measure import CORPUS


def test_the_corpus_finds_the_same_with_every_file_parsed(tmp_path: Path) -> None:
    scripts = sorted(CORPUS.glob("*/*.txt"))  # both halves, notebooks too
    for script in scripts:
        shutil.copyfile(script, tmp_path / script.name[:-4])
    gated = lint_paths([str(tmp_path)], cache=False)
    with mock.patch.object(_run, "worth_parsing", lambda text: "torch" in text):
        everything = lint_paths([str(tmp_path)], cache=False)
    assert gated.findings == everything.findings and len(gated.findings) > 50
    # and the test is not empty: some real scripts of the corpus need no parsing
    unparsed = [p.name for p in tmp_path.iterdir() if not _run.worth_parsing(p.read_text())]
    assert unparsed


def test_a_model_file_is_read_not_parsed() -> None:
    model = "import torch.nn as nn\n\nclass Net(nn.Module):\n    def forward(self, x):\n"
    assert not _run.worth_parsing(model + "        return self.fc(x)\n")
    assert _run.worth_parsing(model + "        return self.fc(x).backward()\n")
    assert not _run.worth_parsing("def evaluate(model):\n    loss.backward()\n")  # no torch


def test_identifiers_outside_ascii_are_parsed(tmp_path: Path) -> None:
    # The parser reads identifiers normalised (NFKC): full-width `ｓｔｅｐ` is `step`, which a
    # search of the text for "step" does not see.
    source = """
    import torch
    for x in data:
        loss = model(x)
        loss.ｂａｃｋｗａｒｄ()
        optimizer.ｓｔｅｐ()
    """
    assert found(tmp_path, source) == [("RGT105", 5)]


def test_an_evaluation_function_named_across_a_line_continuation(tmp_path: Path) -> None:
    source = """
    import torch
    def \\
            evaluate(model, batches):
        for x in batches:
            model(x)
    """
    assert found(tmp_path, source) == [("RGT203", 2)]


def test_a_collective_under_a_rank_test_spelled_in_capitals(tmp_path: Path) -> None:
    source = """
    import os
    import torch
    import torch.distributed as dist
    if int(os.environ["RANK"]) == 0:
        dist.all_reduce(t)
    """
    assert found(tmp_path, source) == [("RGT403", 5)]


def test_a_collective_under_a_main_process_test_without_the_word_rank(tmp_path: Path) -> None:
    source = """
    import torch
    import torch.distributed as dist
    if is_global_zero():
        dist.barrier()
    """
    assert found(tmp_path, source) == [("RGT403", 4)]
