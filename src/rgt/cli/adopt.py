"""`rgt adopt NAME [JOB...]`: jobs launched on a machine from elsewhere, brought under this
RGT_HOME so the teardown gate can see them pulled and verified."""

from __future__ import annotations

import click

from rgt.cli._output import Output, escape, output_options
from rgt.state.store import Store


@click.command()
@click.argument("name")
@click.argument("job_ids", nargs=-1, metavar="[JOB]...")
@output_options
def adopt(name: str, job_ids: tuple[str, ...], out: Output) -> None:
    """Record jobs that machine NAME runs but this RGT_HOME never launched (default: all of
    them). Reads their spec and status from the machine; changes nothing there."""
    from rgt.jobs.adopt import adopt as do_adopt

    data = do_adopt(Store.open(), name, job_ids)

    def human(o: Output) -> None:
        for job in data["adopted"]:
            command = " ".join(job["command"])
            o.line(f"adopted {job['job_id']} ({job['state']}): {escape(command)}")
        for job_id in data["already_known"]:
            o.line(f"{job_id} was already known here")
        if not data["adopted"] and not data["already_known"]:
            o.line(f"every job on {name} is already known here ({data['on_machine']} job(s))")
        elif data["adopted"]:
            o.line(f"next: `rgt pull JOB` each one, then `rgt down {name}`")

    out.result(data, human)


def register(cli: click.Group) -> None:
    cli.add_command(adopt)
