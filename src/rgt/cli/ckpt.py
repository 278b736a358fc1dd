"""`rgt ckpt export`: turn an rgt.ckpt checkpoint into a plain torch.save or safetensors file."""

from __future__ import annotations

from dataclasses import asdict

import click

from rgt.cli._output import Output, output_options


@click.group()
def ckpt() -> None:
    """Checkpoints written by rgt.ckpt."""


@ckpt.command("export")
@click.argument("source", type=click.Path(exists=True))
@click.option(
    "--to",
    "fmt",
    type=click.Choice(["torch", "safetensors"]),
    default="torch",
    show_default=True,
    help="torch: the nested state for torch.load; safetensors: tensors by dotted name.",
)
@click.option("-o", "--out", "out_path", type=click.Path(), required=True, help="File to write.")
@output_options
def export_command(source: str, fmt: str, out_path: str, out: Output) -> None:
    """Export SOURCE (a checkpoint directory: its newest verified checkpoint; or a data file).

    Example:  rgt ckpt export runs/ckpt --to safetensors -o model.safetensors
    """
    from rgt.ckpt.export import export

    done = export(source, out_path, fmt)
    step = "" if done.step is None else f" (step {done.step})"
    out.result(
        asdict(done),
        lambda o: o.line(
            f"exported {done.source}{step} -> {done.path}: {done.format}, "
            f"{done.tensors} tensors, {done.bytes} bytes"
        ),
    )


def register(cli: click.Group) -> None:
    cli.add_command(ckpt)
