"""Does a change to the lint engine leave every finding as it was? Old and new, one diff.

    .venv/bin/python bench/lint_identical.py --base 996b08f [--lines 50000]

Two copies of ``src/`` are made at the same moment: the working tree's (new), and the same with
the engine's files (``ENGINE``: the walk, the facts, the runner, reading and forking, not the
rules) as they were at ``--base`` (old), so rules being changed meanwhile are the same on both
sides; the corpora are copied once too. Each copy lints, in its own interpreter: the
50,000-line tree of bench_lint.py (in one process and with forked workers, and through the
CLI's ``--json``), each script of tests/lint/corpus on its own and each half as one folder,
and every case of tests/lint/xcorpus (as reported and as fixed), and each ``--tree`` (a real
repository) whole. Every finding, skipped file and count must be the same.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from bench_lint import build_tree  # noqa: E402  # the script's own folder

ENGINE = [f"src/rgt/lint/{n}.py" for n in (
    "__init__", "_run", "_fork", "_cache", "_source", "_tree", "_facts", "_facts_index",
    "_nodes", "_spans", "_words", "_suite", "_locate", "_cells", "_project")]  # fmt: skip
ENGINE += ["src/rgt/cli/lint.py", "src/rgt/cli/__init__.py"]

# Run inside each copy: lint everything, print one JSON document of all reports.
DRIVER = r"""
import json, sys, tempfile
from pathlib import Path
from rgt.lint import _run, lint_paths
from tests.lint import xmeasure
tree, corpus, single = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3] == "1"
xcorpus = corpus.parent / "xcorpus"
if single:
    _run.PARALLEL_FROM = 10**9
out = {}
def lint(name, paths):
    out[name] = lint_paths([str(p) for p in paths], cache=False).to_json()
lint("bench tree", [tree])
for other in sys.argv[4:]:
    lint(f"tree {other}", [Path(other)])
for half in ("dev", "heldout"):
    lint(f"corpus {half}", [corpus / half])
    for script in sorted((corpus / half).glob("*.py")):
        lint(f"corpus {half}/{script.name}", [script])
for case_file in sorted(xcorpus.glob("*/*.txt")):
    case = xmeasure.parse(case_file)
    for variant, files in (("reported", case.files), ("fixed", case.fixed)):
        if files is None:
            continue
        with tempfile.TemporaryDirectory() as tmp:
            for name, code in files.items():
                (Path(tmp) / name).parent.mkdir(parents=True, exist_ok=True)
                (Path(tmp) / name).write_text(code)
            report = lint_paths([tmp], cache=False).to_json()
        text = json.dumps(report).replace(tmp, "<case>")
        out[f"xcorpus {case_file.parent.name}/{case_file.name} {variant}"] = json.loads(text)
json.dump(out, sys.stdout, sort_keys=True)
"""


def copies(tmp: Path, base: str) -> tuple[Path, Path]:
    """``old/src`` (the engine's files at ``base``) and ``new/src`` (the working tree)."""
    old, new = tmp / "old", tmp / "new"
    for side in (old, new):
        shutil.copytree(ROOT / "src", side / "src", ignore=shutil.ignore_patterns("__pycache__"))
    for path in ENGINE:
        shown = subprocess.run(["git", "show", f"{base}:{path}"], cwd=ROOT, capture_output=True)
        if shown.returncode == 0:
            (old / path).write_bytes(shown.stdout)
        else:  # added since base
            (old / path).unlink(missing_ok=True)
    return old / "src", new / "src"


def reports(src: Path, tree: Path, corpus: Path, single: bool, also: list[str]) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": f"{src}{os.pathsep}{ROOT}", "RGT_HOME": str(tree.parent)}
    argv = [sys.executable, "-c", DRIVER, str(tree), str(corpus), "1" if single else "0", *also]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT, check=False)
    if done.returncode:
        sys.exit(f"{src}: {done.stderr[-3000:]}")
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def cli(src: Path, tree: Path) -> str:
    env = {**os.environ, "PYTHONPATH": str(src), "RGT_HOME": str(tree.parent)}
    argv = [sys.executable, "-m", "rgt.cli", "lint", "--json", "--no-cache", str(tree)]
    return subprocess.run(argv, capture_output=True, text=True, env=env, check=False).stdout


def differences(name: str, old: dict[str, Any], new: dict[str, Any]) -> int:
    bad = [k for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)]
    for key in bad[:10]:
        print(f"  {name}: {key} differs")
    findings = sum(len(report["findings"]) for report in old.values())
    print(f"{name}: {len(old)} reports, {findings} findings (old); {len(bad)} differ")
    return len(bad)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", required=True, help="the commit of the old engine")
    parser.add_argument("--lines", type=int, default=50_000)
    parser.add_argument("--tree", action="append", default=[], help="also lint this folder")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        old_src, new_src = copies(Path(tmp), args.base)
        tree, corpus = Path(tmp, "repo"), Path(tmp, "corpus")
        tree.mkdir()
        build_tree(tree, args.lines)
        # The corpora as they are now: cases being written meanwhile are the same on both sides.
        shutil.copytree(ROOT / "tests/lint/xcorpus", Path(tmp, "xcorpus"))
        for half in ("dev", "heldout"):
            (corpus / half).mkdir(parents=True)
            for script in (ROOT / "tests/lint/corpus" / half).glob("*.txt"):
                shutil.copyfile(script, corpus / half / script.name.removesuffix(".txt"))
        also = [str(Path(t).resolve()) for t in args.tree]
        old = reports(old_src, tree, corpus, False, also)
        bad = differences("forked workers", old, reports(new_src, tree, corpus, False, also))
        bad += differences("one process", old, reports(new_src, tree, corpus, True, also))
        same = cli(old_src, tree) == cli(new_src, tree)
        print(f"rgt lint --json --no-cache on the bench tree: {'same' if same else 'DIFFERS'}")
    sys.exit(1 if bad or not same else 0)


if __name__ == "__main__":
    main()
