"""Project words: a word whose presence lets a finding through (dropout, CUDA) counts only in
the files linked to a file by local imports; one whose presence holds a finding back
(``set_epoch``, a checkpoint load) counts anywhere in what is linted."""

from __future__ import annotations

import textwrap
from pathlib import Path

from rgt.lint import lint_paths
from rgt.lint._words import identifiers
from tests.lint.measure import CORPUS
from tests.lint.test_modes import EVALUATE as LOOP
from tests.lint.test_modes import MODEL

EVALUATE = "import torch\n" + LOOP


def _write(root: Path, files: dict[str, str]) -> None:
    for name, code in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(textwrap.dedent(code).lstrip("\n"))


def _found(root: Path) -> set[tuple[str, str]]:
    return {(str(Path(f.path).relative_to(root)), f.code) for f in lint_paths([str(root)]).findings}


def test_one_example_does_not_lend_another_its_dropout(tmp_path: Path) -> None:
    # pytorch/examples' super_resolution was told its test loop runs dropout in training mode
    # because other examples in the same tree have dropout layers.
    _write(
        tmp_path,
        {
            "mnist/main.py": MODEL + LOOP,
            "super_resolution/main.py": "import model\n" + EVALUATE,
            "super_resolution/model.py": "import torch.nn as nn\nclass Net(nn.Module): pass\n",
        },
    )
    assert _found(tmp_path) == {("mnist/main.py", "RGT201")}


def test_a_model_imported_either_way_lends_its_dropout(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "a/main.py": "from model import Net\n" + EVALUATE,
            "a/model.py": MODEL,
            "b/evaluation.py": EVALUATE,
            "b/model.py": MODEL + "from evaluation import evaluate\n",  # imports the loop
        },
    )
    assert _found(tmp_path) == {("a/main.py", "RGT201"), ("b/evaluation.py", "RGT201")}


def test_set_epoch_anywhere_still_holds_the_sampler_finding_back(tmp_path: Path) -> None:
    # tools/train.py imports the package by a name rgt cannot resolve from tools/ (it is run
    # with the repository on sys.path): set_epoch there still counts for pkg/data.py.
    data = """
    import torch
    from torch.utils.data import DataLoader, DistributedSampler

    def build(train_set):
        return DataLoader(train_set, sampler=DistributedSampler(train_set), num_workers=2)

    def epochs(loader):
        for epoch in range(90):
            for batch in loader:
                yield batch
    """
    train = "from pkg.data import build\nfor epoch in range(9):\n    sampler.set_epoch(epoch)\n"
    _write(tmp_path, {"pkg/data.py": data})
    assert _found(tmp_path) == {("pkg/data.py", "RGT302")}
    _write(tmp_path, {"tools/train.py": train})
    assert _found(tmp_path) == set()


def test_known_words_are_not_looked_for_again_and_the_answer_is_the_same() -> None:
    texts = [p.read_text() for p in sorted(CORPUS.glob("*/*.py.txt"))]
    each = set().union(*(identifiers(t) for t in texts))
    known: set[str] = set()
    for text in texts:
        known |= identifiers(text, known=known)
    assert known == each and {"set_epoch", "cuda"} <= each
    assert identifiers("x.set_epoch(1)", known={"set_epoch"}) == set()
    assert identifiers("x.set_epoch(1)") == {"set_epoch"}


def test_a_file_reached_by_two_names_is_read_once(tmp_path: Path) -> None:
    _write(tmp_path, {"pkg/model.py": MODEL, "pkg/main.py": "import model\n" + EVALUATE})
    (tmp_path / "pkg" / "alias.py").symlink_to(tmp_path / "pkg" / "main.py")
    report = lint_paths([str(tmp_path / "pkg" / "alias.py"), str(tmp_path / "pkg")])
    assert report.files == 2  # alias.py and model.py: main.py is alias.py
    assert [(Path(f.path).name, f.code) for f in report.findings] == [("alias.py", "RGT201")]


LOADER = """
import torch
from torch.utils.data import DataLoader

def build(dataset):
    return DataLoader(dataset, batch_size=8, num_workers=4)
"""
GPU_SCRIPT = """
import torch
{imports}

def main(dataset):
    model = torch.nn.Linear(2, 2).cuda()
    return build(dataset), model
"""


def test_a_package_imported_by_its_full_name_from_another_folder_is_linked(
    tmp_path: Path,
) -> None:
    # detectron2's tools/train_net.py imports `detectron2.data` by its full name: the package
    # sits at the project's root (beside setup.py), not beside the script. Its loader runs on
    # the script's GPU, so it gets the pin_memory advice.
    _write(
        tmp_path,
        {
            "setup.py": "",
            "proj/__init__.py": "",
            "proj/data.py": LOADER,
            "tools/train.py": GPU_SCRIPT.format(imports="from proj.data import build"),
        },
    )
    script = str(tmp_path / "tools" / "train.py")
    report = lint_paths([script])
    assert [(Path(f.path).name, f.code) for f in report.findings] == [("data.py", "RGT502")]
    assert report.files == 2  # `from proj.data import`: the module itself
    (tmp_path / "setup.py").unlink()  # no project root: only the script's own folder counts
    assert lint_paths([script]).files == 1


def test_a_relative_import_is_never_looked_for_at_the_root(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "pyproject.toml": "",
            "data.py": LOADER,
            "tools/train.py": GPU_SCRIPT.format(imports="from .data import build"),
        },
    )
    assert lint_paths([str(tmp_path / "tools" / "train.py")]).files == 1


def test_a_helper_in_a_test_suites_folder_gets_no_advice(tmp_path: Path) -> None:
    # fairseq's tests/utils.py builds tiny CPU loaders for its tests (not named test_*.py).
    helper = GPU_SCRIPT.format(imports="") + LOADER.replace("import torch\n", "")
    _write(tmp_path, {"tests/utils.py": helper, "tools/utils.py": helper, "test/util.py": helper})
    assert _found(tmp_path) == {("tools/utils.py", "RGT502")}


BENCHMARK = """
import torch
import torch.nn as nn
{imports}

class Small(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = {body}

    def forward(self, x):
        return self.body(x)

def test(batches):
    model = Small().to("cpu")
    for x in batches:
        model(x)
"""


def test_a_model_built_from_a_class_of_the_file_has_only_the_layers_it_imports(
    tmp_path: Path,
) -> None:
    # fairseq's Demucs benchmark: `demucs = Demucs(...)` then a timing loop. A script that
    # imports the file has dropout, so its group does; the model it evaluates has none.
    _write(
        tmp_path,
        {
            "bench.py": BENCHMARK.format(imports="", body="nn.Linear(2, 2)"),
            "main.py": "import bench\nimport torch.nn as nn\nhead = nn.Dropout(0.1)\n",
        },
    )
    assert _found(tmp_path) == {("bench.py", "RGT203")}
    # built of a block that a module it imports defines with dropout: the warning is right
    _write(
        tmp_path,
        {
            "bench.py": BENCHMARK.format(imports="from blocks import Block", body="Block()"),
            "blocks.py": "import torch.nn as nn\nclass Block(nn.Dropout):\n    pass\n",
        },
    )
    assert _found(tmp_path) == {("bench.py", "RGT201"), ("bench.py", "RGT203")}
