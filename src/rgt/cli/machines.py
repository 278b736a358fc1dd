"""Machines: `rgt up`, `rgt approve`, `rgt down`."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

from rgt.cli._autostop import approve_autostop, autostop_options, self_stop_option
from rgt.cli._jobref import job_ids
from rgt.cli._notebook import notebook_up_options
from rgt.cli._output import Output, escape, output_options
from rgt.cli._runargs import resource_options
from rgt.cli.vendors import vendor_up_options
from rgt.state.store import Store

if TYPE_CHECKING:
    from rgt.resources import Resources

F = TypeVar("F", bound=Callable[..., Any])
_KUBE = ("context", "namespace", "pvc", "kubeconfig", "k8s_image")


def kube_up_options(func: F) -> F:
    """`rgt up kubernetes` options, handed over as one ``kube`` dict."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        kwargs["kube"] = {key: kwargs.pop(key) for key in _KUBE}
        return func(*args, **kwargs)

    for option in (
        click.option("--k8s-image", help="kubernetes: the jobs' image (python3 and tar in it)."),
        click.option("--kubeconfig", help="kubernetes: kubeconfig file (default: ~/.kube/config)."),
        click.option("--pvc", help="kubernetes: the PersistentVolumeClaim for durable files."),
        click.option("--namespace", help="kubernetes: the namespace (default: default)."),
        click.option("--context", help="kubernetes: the kubeconfig context (default: current)."),
    ):
        wrapper = option(wrapper)
    return wrapper  # type: ignore[return-value]


@click.command()
@click.argument("profile")
@click.option("--name", required=True, help="A short name you will use in every other command.")
@click.option(
    "--ssh", "ssh_line", help='The ssh line the console shows, e.g. "ssh -p 2222 root@host".'
)
@click.option("--price", type=float, help="Price per hour, for the money clock.")
@click.option("--root", help="Durable directory on the machine (default: the profile's).")
@click.option(
    "--replace",
    is_flag=True,
    help="NAME is an active machine with jobs: release it through the gate first.",
)
@click.option(
    "--mirror",
    "mirrors",
    multiple=True,
    metavar="KIND=URL",
    help="Jobs use this mirror (KIND: hf, pip, conda) instead of the profile's; repeatable.",
)
@click.option("--no-mirrors", is_flag=True, help="Jobs get none of the profile's mirror settings.")
@click.option(
    "--expect-gpu",
    metavar="TYPE:N",
    help="The GPUs this machine should have, e.g. A100:8; `rgt audit` says when it has fewer "
    "or others (renting with --gpu sets it from the offer).",
)
@click.option("--internet", is_flag=True, help="kaggle: kernels may reach the internet.")
@click.option(
    "--dataset",
    "datasets",
    multiple=True,
    metavar="OWNER/SLUG",
    help="kaggle: a dataset every kernel gets.",
)
@notebook_up_options
@vendor_up_options
@kube_up_options
@resource_options("slurm/kubernetes: every run's default. ")
@self_stop_option
@output_options
def up(
    profile: str,
    name: str,
    ssh_line: str | None,
    price: float | None,
    root: str | None,
    replace: bool,
    mirrors: tuple[str, ...],
    no_mirrors: bool,
    vendor: object,
    kube: dict[str, str | None],
    notebook: dict[str, Any],
    resources: Resources | None,
    out: Output,
    internet: bool = False,
    datasets: tuple[str, ...] = (),
    expect_gpu: str | None = None,
    self_stop: str | None = None,
) -> None:
    """Register a machine (PROFILE: local, generic-ssh, autodl, slurm, kubernetes, …); with
    --gpu, rent it through the vendor's API (runpod, vastai, lambda, paperspace); colab and
    kaggle-notebook register the notebook VM this runs in (README: Colab and Kaggle notebooks)."""
    from rgt.platforms import UpRequest
    from rgt.profiles.network import parse_mirrors
    from rgt.verbs.up import Told
    from rgt.verbs.up import up as register

    request = UpRequest(
        *(profile, name, ssh_line, price, root, replace, vendor, parse_mirrors(mirrors)),
        *(no_mirrors, kube, notebook, internet, datasets),
    )
    data = register(request, Told(resources, expect_gpu, self_stop))

    def human(o: Output) -> None:
        o.line(
            f"registered [bold]{data['machine']}[/] ({data['backend']}, durable root "
            f"{escape(str(data['durable_root']))})"
        )
        for note in data["notes"]:
            o.line(f"  • {escape(note)}")

    out.result(data, human)


@click.command()
@click.argument("name", required=False)
@click.option(
    "--abandon",
    multiple=True,
    metavar="JOB",
    callback=job_ids,
    help="A job whose artifacts you knowingly give up (they are never pulled).",
)
@click.option(
    "--set-pin", is_flag=True, help="Set or change the approval PIN (asked at the terminal)."
)
@click.option("--remove-pin", is_flag=True, help="Remove the approval PIN (needs the PIN).")
@click.option(
    "--no-pin",
    is_flag=True,
    help="Approve without a PIN from now on (recorded; refused once a PIN is set). Without a "
    "PIN, any program that drives a terminal can approve a release.",
)
@autostop_options
@output_options
def approve(
    name: str | None,
    abandon: tuple[str, ...],
    set_pin: bool,
    remove_pin: bool,
    no_pin: bool,
    out: Output,
    autostop: dict[str, Any] | None = None,
) -> None:
    """Approve releasing machine NAME, or with --autostop its autostop policy. Needs a human
    at a terminal and the approval PIN (the first approval sets it; `--no-pin` opts out)."""
    if set_pin or remove_pin or (no_pin and not name):
        changed = _pin_choice(set_pin, remove_pin, no_pin)
        out.result(changed, lambda o: o.line(f"approval PIN {changed['pin']}"))
        return
    if not name:
        from rgt.errors import UsageError

        raise UsageError("give the machine NAME", fix="`rgt approve NAME` (or `--set-pin`)")
    from rgt.lifecycle.teardown import approve_interactively

    if no_pin:
        from rgt.lifecycle.approvals import opt_out_at_terminal

        opt_out_at_terminal(f"rgt approve {name} --no-pin")
    if autostop is not None:
        return approve_autostop(name, autostop, out)

    approval = approve_interactively(Store.open(), name, abandon)
    out.result(
        approval,
        lambda o: o.line(f"approved release of [bold]{name}[/]; now run `rgt down {name}`"),
    )


def _pin_choice(set_pin: bool, remove_pin: bool, no_pin: bool) -> dict[str, Any]:
    """`--set-pin`, `--remove-pin` or `--no-pin` alone: each one at the terminal."""
    from rgt.errors import UsageError
    from rgt.lifecycle import approvals

    if set_pin + remove_pin + no_pin > 1:
        raise UsageError("choose one of --set-pin, --remove-pin, --no-pin", fix="give one")
    if no_pin:
        return approvals.opt_out_at_terminal("rgt approve --no-pin")
    return approvals.change_pin(remove=remove_pin)


@click.command()
@click.argument("name")
@click.option(
    "--yes",
    is_flag=True,
    help="Never ask (for scripts). It never approves: a human runs `rgt approve NAME` first.",
)
@click.option("--check", is_flag=True, help="Only show the gate's verdict; change nothing.")
@click.option("--keep-volume", is_flag=True, help="Vendor API machines: stop, keep the disk.")
@click.option("--rehash", is_flag=True, help="Re-hash every pulled file (default: size, mtime).")
@output_options
def down(name: str, yes: bool, check: bool, keep_volume: bool, rehash: bool, out: Output) -> None:
    """Release machine NAME through the teardown gate (ended, pulled, verified, approved)."""
    from rgt.errors import needs_human
    from rgt.lifecycle.approvals import approve_at_terminal
    from rgt.lifecycle.teardown import teardown

    consent = needs_human if yes else approve_at_terminal  # --yes: never ask
    result = teardown(
        Store.open(), name, yes=yes, check_only=check, keep_volume=keep_volume, rehash=rehash,
        consent=consent,
    )  # fmt: skip

    def human(o: Output) -> None:
        for c in result["gate"]["checks"]:
            mark = "[green]✓[/]" if c["ok"] else "[red]✗[/]"
            o.line(f"{mark} {c['name']}: {escape(c['detail'])}")
        for note in result.get("notes", []):
            o.line(f"  • {escape(note)}")
        if result.get("released"):
            o.line(f"[bold]{name}[/] released: {escape(result['meter'])}")
        elif result.get("kept"):  # --keep-volume: the instance and its volume remain
            o.line(f"[bold]{name}[/]: {escape(result['kept'])}; `rgt down {name}` destroys it")
        for bill in result.get("still_bills") or []:
            o.line(f"  still bills: {escape(bill)}")
        for clock in result.get("danger_clocks") or []:  # SSH-line platforms: dated
            o.line(f"  danger clock: {escape(clock['consequence'])} on {clock['date']}")

    out.result(result, human)


def register(cli: click.Group) -> None:
    for command in (up, approve, down):
        cli.add_command(command)
