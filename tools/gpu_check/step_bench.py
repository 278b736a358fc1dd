"""Step 4 (for information): a sharded save's blocking time, rgt vs ``dcp.async_save``.

``bench.py`` under ``torchrun`` on the same ranks and model as steps 2-3. PASS means only that
every method was measured; the numbers are the point (issue 35's goal on 2 gloo ranks is
blocking <= 0.3x ``async_save``; here it is read on this machine's GPU).
"""

from __future__ import annotations

import json

from _core import Context, Step, gpu_list, torchrun

METHODS = ("rgt async", "dcp.async_save", "dcp.save")


def run(ctx: Context, step: Step) -> None:
    base = ctx.work / "step4"
    env = dict(ctx.env, RGT_OUTPUT_DIR=str(base / "outputs"), RGT_CKPT_DIR=str(base / "ckpt"))
    if not ctx.cpu:
        env["CUDA_VISIBLE_DEVICES"] = gpu_list(ctx.world)
    (base / "outputs").mkdir(parents=True, exist_ok=True)
    code, log = torchrun(step, "bench.py", ctx.world, env, base)
    if not step.check(code == 0, f"torchrun of {ctx.world} rank(s) exits 0", code or None):
        ctx.keep_failure(step, "torchrun", log)
        return
    doc = json.loads((base / "outputs" / "bench.json").read_text())
    step.numbers.update(doc)
    step.note(f"state {doc['state_mb']} MB, {doc['repeats']} repeats after a warm-up")
    for method in METHODS:
        cells = [doc.get(f"{method} {what} s") for what in ("blocking", "durable")]
        measured = all(cell and cell["median"] > 0 for cell in cells)
        shown = "; ".join(
            f"{what} median {c['median']:.4f} s [{c['min']:.4f}-{c['max']:.4f}]"
            for what, c in zip(("blocking", "durable"), cells, strict=True)
            if c
        )
        step.check(measured, f"{method:15}", shown)
    ratio = doc.get("blocking rgt / async_save")
    step.note(f"blocking rgt / async_save = {ratio:.3f}" if ratio else "no ratio")
