"""`rgt push` (code snapshots and data, resumable) and `rgt trust` (re-trust a host key)."""

from __future__ import annotations

from typing import Any

import click

from rgt.cli._output import Output, escape, output_options
from rgt.state.store import Store
from rgt.transport._ignored import HOW_TO_INCLUDE, SHOWN, Ignored


@click.command()
@click.argument("name")
# path_type=str keeps a trailing slash: "data/" pushes the folder's contents, as with rsync.
@click.argument("paths", nargs=-1, type=click.Path(exists=True, path_type=str))
@click.option(
    "--to",
    "to",
    help="Remote directory for data (default <durable>/data; relative = under the durable root).",
)
@output_options
def push(name: str, paths: tuple[str, ...], to: str | None, out: Output) -> None:
    """Push the project's code (no PATHS) or data PATHS to machine NAME."""
    from rgt.jobs.push import push as do_push

    with _progress(out, f"push → {name}") as update:
        report = do_push(Store.open(), name, paths, to=to, progress=update, notice=out.warn)
    data = report.to_json()

    def human(o: Output) -> None:
        what = f"code snapshot {report.snapshot}" if report.kind == "code" else "data"
        o.line(
            f"pushed {what}: {len(report.files)} file(s), {report.total_bytes:,} bytes "
            f"→ {name}:{escape(report.remote)}"
        )
        if report.attempts > 1:
            o.line(f"  resumed after {report.attempts - 1} interruption(s)")
        o.line("[green]every file's sha256 matches on the machine[/]")
        if report.gitignored and report.gitignored.paths:
            _left_out(o, report.gitignored)

    out.result(data, human)


def _left_out(o: Output, ignored: Ignored) -> None:
    shown = ", ".join(ignored.paths[:SHOWN]) + (", …" if len(ignored.paths) > SHOWN else "")
    o.out.print(
        f"note: .gitignore left {len(ignored.paths)} file(s) ({ignored.bytes:,} bytes) out of "
        f"the snapshot: {shown}",
        markup=False,
    )
    o.out.print(f"  to include them: {HOW_TO_INCLUDE}", markup=False)


@click.command()
@click.argument("name")
@output_options
def trust(name: str, out: Output) -> None:
    """Forget NAME's recorded host key and trust the one it presents now."""
    from rgt.backends.ssh import retrust
    from rgt.lifecycle.approvals import approve_at_terminal

    data = retrust(Store.open(), name, approve_at_terminal)
    out.result(
        data,
        lambda o: o.line(
            f"{name} now trusted with host key {data['new_host_key']} "
            f"(was {data['old_host_key']}); compare it with the platform console if it shows one"
        ),
    )


class _progress:
    """A rich progress bar on stderr (bytes, rate, ETA); silent with --json."""

    def __init__(self, out: Output, label: str) -> None:
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            Progress,
            TimeRemainingColumn,
            TransferSpeedColumn,
        )

        columns = (BarColumn(), DownloadColumn(), TransferSpeedColumn(), TimeRemainingColumn())
        self.bar = Progress(*columns, console=out.err, disable=out.json_mode, transient=True)
        self.task = self.bar.add_task(label, total=None)

    def __enter__(self) -> Any:
        self.bar.start()
        return lambda done, total: self.bar.update(self.task, completed=done, total=total)

    def __exit__(self, *exc: object) -> None:
        self.bar.stop()


def register(cli: click.Group) -> None:
    for command in (push, trust):
        cli.add_command(command)
