"""Rendering: every citation kind, LaTeX escaping, and missing citations as named errors."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from rgt.deliver.evidence import Claim, add_claim
from rgt.deliver.numbers import NumberFormat
from rgt.deliver.render import load_documents, render
from rgt.deliver.runs import load_stored, stored_run_ids
from rgt.deliver.workspace import Workspace
from rgt.errors import SpecError, UsageError

TEMPLATE = """\
((# every number below comes from the evidence store #))
One run: << metric(first, "val_accuracy", digits=3) >>.
Seeds: << agg("train_demo-*", "val_loss", digits=3) >>.
Claim: << claim("acc") >> (with CI: << claim("acc", ci=true) >>).
((* for r in runs *))- << r >>: << metric(r, "val_loss", digits=2) >>
((* endfor *))"""


def _values(ws: Workspace, metric: str) -> list[float]:
    return [load_stored(ws, r).metric(metric).value for r in stored_run_ids(ws)]


def _setup(ws: Workspace, tmp_path: Path, suffix: str) -> tuple[Path, Path]:
    add_claim(ws, Claim("acc", "accuracy", "val_accuracy", run_glob="train_demo-*",
                        format=NumberFormat(1, percent=True)))  # fmt: skip
    runs = stored_run_ids(ws)
    template = tmp_path / f"report{suffix}.j2"
    header = f'((* set first = "{runs[0]}" *))((* set runs = {runs!r} *))'
    template.write_text(header + TEMPLATE)
    return template, ws.root / f"report{suffix}"


def test_markdown_numbers_equal_the_evidence(demo_ws: Workspace, tmp_path: Path) -> None:
    template, out = _setup(demo_ws, tmp_path, ".md")
    result = render(demo_ws, template, out)
    text = out.read_text()
    acc, loss = _values(demo_ws, "val_accuracy"), _values(demo_ws, "val_loss")
    assert f"One run: {acc[0]:.3f}." in text
    half = 4.3027 * statistics.stdev(loss) / 3**0.5  # t(0.975, df=2)
    assert f"Seeds: {statistics.fmean(loss):.3f} ± {half:.3f} (95 % CI, n=3)." in text
    assert f"Claim: {100 * statistics.fmean(acc):.1f}% (with CI:" in text
    for run_id, value in zip(stored_run_ids(demo_ws), loss, strict=True):
        assert f"- {run_id}: {value:.2f}" in text
    kinds = [c["kind"] for c in result.citations]
    assert kinds.count("metric") == 4 and "aggregate" in kinds and kinds.count("claim") == 2
    assert load_documents(demo_ws) == [{"template": str(template), "out": "report.md"}]


def test_latex_output_escapes_percent(demo_ws: Workspace, tmp_path: Path) -> None:
    template, out = _setup(demo_ws, tmp_path, ".tex")
    render(demo_ws, template, out)
    text = out.read_text()
    assert r"\%" in text and r"$\pm$" in text
    assert "% (" not in text.replace(r"\%", "")


@pytest.mark.parametrize(
    ("expression", "named"),
    [
        ('metric("train_demo-s9-000000000000", "val_loss")', "train_demo-s9-000000000000"),
        ('metric(first, "val_f1")', "val_f1"),
        ('agg("nothing-*", "val_loss")', "nothing-*"),
        ('agg("train_demo-*", "bleu")', "bleu"),
        ('claim("no-such-claim")', "no-such-claim"),
        ("undefined_name", "undefined_name"),
    ],
)
def test_missing_citation_is_an_error_naming_it(
    demo_ws: Workspace, tmp_path: Path, expression: str, named: str
) -> None:
    template = tmp_path / "t.md.j2"
    first = stored_run_ids(demo_ws)[0]
    template.write_text(f'((* set first = "{first}" *))value: << {expression} >>\n')
    out = demo_ws.root / "t.md"
    with pytest.raises(UsageError) as err:
        render(demo_ws, template, out)
    assert named in str(err.value)
    assert not out.exists()  # never a document with a hole in it


def test_syntax_error_names_the_line(demo_ws: Workspace, tmp_path: Path) -> None:
    template = tmp_path / "broken.j2"
    template.write_text("line one\n((* if *))\n")
    with pytest.raises(SpecError) as err:
        render(demo_ws, template, tmp_path / "o.md")
    assert "broken.j2:2" in str(err.value)


def test_cli_render_in_hostile_dir(demo_ws: Workspace, hostile_dir: Path) -> None:
    template = hostile_dir / "note.txt.j2"
    run_id = stored_run_ids(demo_ws)[0]
    template.write_text(f'loss << metric("{run_id}", "val_loss", digits=5) >>\n')
    out = hostile_dir / "note.txt"
    proc = subprocess.run(
        [sys.executable, "-m", "rgt.cli", "deliver", "render", str(template), "-o", str(out),
         "--workspace", str(demo_ws.root), "--json"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["citations"][0]["runs"] == [run_id]
    value = load_stored(demo_ws, run_id).metric("val_loss").value
    assert out.read_text() == f"loss {value:.5f}\n"
