"""The per-file result cache of `rgt lint`: same findings as without it, and a change to a file,
to the codes wanted or to a project-wide word the rules ask about is a miss."""

from __future__ import annotations

import json
import shutil
import textwrap
import time
from pathlib import Path

import pytest

from rgt.lint import RULES, _cache, lint_paths
from rgt.lint._model import finding_json
from rgt.lint._run import worth_parsing
from rgt.lint._source import Text, read
from tests.lint.measure import CORPUS

SCRIPT = """
import torch
from torch.utils.data import DataLoader, DistributedSampler

loader = DataLoader(data, sampler=DistributedSampler(data), num_workers=2)
for epoch in range(10):
    for x, y in loader:
        pass
"""


def _rows(paths: list[str], **kwargs: object) -> list[dict[str, object]]:
    return [finding_json(f) for f in lint_paths(paths, **kwargs).findings]  # type: ignore[arg-type]


@pytest.mark.slow  # > 1 s on two cores
def test_the_whole_report_is_the_same_from_the_cache(tmp_path: Path) -> None:
    scripts = sorted(CORPUS.glob("*/*.txt"))  # both halves: notebooks, skipped files, findings
    for script in scripts:
        shutil.copyfile(script, tmp_path / script.name[:-4])
    cold = lint_paths([str(tmp_path)], cache=False).to_json()
    lint_paths([str(tmp_path)])
    assert lint_paths([str(tmp_path)]).to_json() == cold and cold["skipped"]


def _entries() -> list[Path]:
    """The cache's files: one per folder of linted files."""
    return sorted(_cache.folder().rglob("*.json"))


def _names() -> list[str]:
    """The linted files' names with an entry, over every folder's file."""
    return sorted(n for p in _entries() for n in json.loads(p.read_text())["files"])


def test_cached_findings_equal_uncached_on_the_corpus(tmp_path: Path) -> None:
    for script in sorted((CORPUS / "dev").glob("*.py.txt"))[:12]:
        shutil.copyfile(script, tmp_path / script.name[:-4])
    cold = _rows([str(tmp_path)], cache=False)
    assert _entries() == []  # --no-cache neither reads nor writes
    first, warm = _rows([str(tmp_path)]), _rows([str(tmp_path)])
    assert cold == first == warm and len(cold) > 10
    # one file for the folder, with an entry for each script a rule can speak in
    kept = sorted(p.name for p in tmp_path.iterdir() if worth_parsing(p.read_text()))
    assert len(_entries()) == 1 and _names() == kept and len(kept) >= 10
    stamps = [p.stat().st_mtime_ns for p in _entries()]
    _rows([str(tmp_path)])
    assert [p.stat().st_mtime_ns for p in _entries()] == stamps  # the warm run wrote nothing


def test_a_change_to_the_file_or_a_project_word_is_a_miss(tmp_path: Path) -> None:
    train = tmp_path / "train.py"
    train.write_text(textwrap.dedent(SCRIPT))
    assert [r["code"] for r in _rows([str(train)])] == ["RGT302"]
    (tmp_path / "sampler_util.py").write_text("import torch\n\ndef f(s, e):\n    s.set_epoch(e)\n")
    train.write_text(textwrap.dedent(SCRIPT) + "import sampler_util\n")
    assert _rows([str(train)]) == []  # set_epoch is now called elsewhere in the project
    train.write_text(textwrap.dedent(SCRIPT))
    assert [r["code"] for r in _rows([str(train)])] == ["RGT302"]
    assert _rows([str(train)], ignore=["RGT302"]) == []


def test_a_damaged_entry_is_a_miss(tmp_path: Path) -> None:
    train = tmp_path / "train.py"
    train.write_text(textwrap.dedent(SCRIPT))
    expected = _rows([str(train)])
    for entry in _entries():
        entry.write_text("{not json")
    assert _rows([str(train)]) == expected


def test_one_file_per_folder_and_a_later_run_keeps_the_other_entries(tmp_path: Path) -> None:
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "train.py").write_text(textwrap.dedent(SCRIPT))
        (tmp_path / folder / "util.py").write_text("import torch\n")
    _rows([str(tmp_path / "a" / "train.py")])
    assert len(_entries()) == 1 and _names() == ["train.py"]
    _rows([str(tmp_path)])  # a/train.py's entry stays; b gets its own file (util.py: no entry)
    assert len(_entries()) == 2 and _names() == ["train.py", "train.py"]
    stamps = [p.stat().st_mtime_ns for p in _entries()]
    assert [r["code"] for r in _rows([str(tmp_path / "b")])] == ["RGT302"]  # from the cache
    assert [p.stat().st_mtime_ns for p in _entries()] == stamps


def test_two_runs_on_one_folder_keep_each_others_entries(tmp_path: Path) -> None:
    # Two `rgt lint` at once (an agent's and a human's) each read the folder's file before the
    # other wrote it: the second writer keeps the first one's entries.
    for name in ("train.py", "other.py"):
        (tmp_path / name).write_text(textwrap.dedent(SCRIPT))
    first, second = _cache.Packs(), _cache.Packs()
    texts = {t.path: t for t in _texts(tmp_path)}
    for packs, name in ((first, "train.py"), (second, "other.py")):
        text = texts[str(tmp_path / name)]
        assert packs.load(text, "k", RULES) is None  # both read before either wrote
        packs.store(text, "k", ([], []))
    first.save()
    second.save()
    assert _names() == ["other.py", "train.py"]


def test_a_write_that_fails_leaves_no_temporary_file(tmp_path: Path) -> None:
    train = tmp_path / "train.py"
    train.write_text(textwrap.dedent(SCRIPT))
    (text,) = _texts(tmp_path)
    target = Path(_cache._pack_path(text))
    _cache.sweep()  # today's sweep done: it would remove a leftover temporary file itself
    (target / "in-the-way").mkdir(parents=True)  # os.replace cannot put a file there
    packs = _cache.Packs()
    packs.store(text, "k", ([], []))
    packs.save()  # no error: the cache only costs speed
    assert not target.is_file()
    assert [p.name for p in _cache.folder().rglob("*.tmp")] == []


def _texts(folder: Path) -> list[Text]:
    return [t for p in sorted(folder.glob("*.py")) if isinstance(t := read(p), Text)]


def test_the_entries_of_deleted_files_leave_with_the_next_write(tmp_path: Path) -> None:
    for name in ("train.py", "old.py"):
        (tmp_path / name).write_text(textwrap.dedent(SCRIPT))
    _rows([str(tmp_path)])
    assert _names() == ["old.py", "train.py"]
    (tmp_path / "old.py").unlink()
    (tmp_path / "train.py").write_text(textwrap.dedent(SCRIPT) + "# changed\n")
    _rows([str(tmp_path)])
    assert _names() == ["train.py"]


def test_a_daily_sweep_removes_what_no_folder_needs(tmp_path: Path) -> None:
    for folder in ("kept", "gone"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "train.py").write_text(textwrap.dedent(SCRIPT))
        _rows([str(tmp_path / folder)])
    old_layout = _cache.folder() / "ab" / "ab12.json"  # one file per linted file, as before
    old_layout.parent.mkdir()
    old_layout.write_text("{}")
    shutil.rmtree(tmp_path / "gone")  # a repository deleted
    assert _cache.sweep() == 0  # the first write swept already: not again within a day
    assert _cache.sweep(time.time() + _cache.SWEEP_EVERY_S + 1) == 2
    assert not old_layout.parent.exists() and len(_entries()) == 1  # its folder went too
    (pack,) = _entries()
    assert json.loads(pack.read_text())["folder"] == str(tmp_path / "kept")
    assert _rows([str(tmp_path / "kept")])  # still answered (from the kept pack)


def test_the_sweep_removes_a_pack_named_the_old_way_for_a_folder_still_there(
    tmp_path: Path,
) -> None:
    (tmp_path / "train.py").write_text(textwrap.dedent(SCRIPT))
    _rows([str(tmp_path)])
    (current,) = _entries()
    renamed = current.with_name("0" * 64 + ".json")  # same folder, a name no rgt reads now
    shutil.copy(current, renamed)
    assert _cache.sweep(time.time() + _cache.SWEEP_EVERY_S + 1) == 1
    assert _entries() == [current]


def test_a_file_no_rule_can_speak_in_gets_no_entry(tmp_path: Path) -> None:
    # A model module with no loss, loop, loader or save: never parsed, so nothing to keep (its
    # key would cost more than deciding again).
    (tmp_path / "train.py").write_text(textwrap.dedent(SCRIPT))
    (tmp_path / "model.py").write_text("import torch\n\n\nclass Net(torch.nn.Module):\n    pass\n")
    first = _rows([str(tmp_path)])
    assert _names() == ["train.py"]
    assert _rows([str(tmp_path)]) == first


def test_paths_may_be_pathlib_paths(tmp_path: Path) -> None:
    """A library caller passes what it has: a ``Path`` lints as its string does."""
    (tmp_path / "train.py").write_text(SCRIPT)
    as_text = lint_paths([str(tmp_path)], cache=False).to_json()
    assert as_text["findings"]
    assert lint_paths([tmp_path], cache=False).to_json() == as_text
    assert lint_paths([tmp_path / "train.py"], cache=False).to_json()["findings"]
