"""`rgt fetch NAME SOURCE`: download a hub repo or a URL on the machine (rgt.fetch)."""

from __future__ import annotations

import os
import sys

import click

from rgt.cli._output import Output, output_options
from rgt.state.store import Store

TOKEN_VAR = "HF_TOKEN"


@click.command()
@click.argument("name")
@click.argument("source")
@click.option("--include", "includes", multiple=True, metavar="PATTERN", help="Only these files.")
@click.option("--to", metavar="PATH", help="Directory on the machine (default: durable/models/…).")
@click.option("--token-stdin", is_flag=True, help="Read the hub token from stdin (a secret).")
@click.option("--sha256", metavar="HEX", help="A URL's expected sha256 (a hub has its own).")
@click.option(
    "--max-bytes",
    type=click.IntRange(min=1),
    metavar="N",
    help="Refuse a larger file and cut a body at N bytes (a body with no length: 16 GiB).",
)
@click.option("--wait", "wait_s", type=float, default=0, help="Follow it this many seconds.")
@click.option(
    "--verify",
    is_flag=True,
    help="Download nothing: check the HF cache already on NAME (every snapshot file against the "
    "hash its blob's name gives).",
)
@click.option("--cache", metavar="DIR", help="--verify: the cache dir (default: as HF resolves).")
@output_options
def fetch(
    name: str,
    source: str,
    includes: tuple[str, ...],
    to: str | None,
    token_stdin: bool,
    sha256: str | None,
    max_bytes: int | None,
    wait_s: float,
    out: Output,
    verify: bool = False,
    cache: str | None = None,
) -> None:
    """Download hf://ORG/MODEL[@REV] or an https:// URL ON NAME, resumable, as a job."""
    from rgt.fetch import FetchRequest, start_fetch, start_verify
    from rgt.jobs.launch import probe

    token_env = None
    if token_stdin:
        os.environ[TOKEN_VAR] = sys.stdin.readline().strip()  # this process only, sent by stdin
        token_env = TOKEN_VAR
    store = Store.open()
    if verify:
        record, target = start_verify(store, name, source, cache), cache or "the HF cache"
    else:
        request = FetchRequest(source, includes, to, token_env, sha256, max_bytes)
        record, target = start_fetch(store, name, request)
    out.info(f"fetch {record.job_id} on {name} -> {target}; follow with `rgt watch {name}`")
    data = {"job_id": record.job_id, "machine": name, "source": source, "to": target}
    if wait_s > 0:
        result = probe(store, record.job_id, wait_s)
        data.update(state=result.state.value, log_tail=result.log_tail)
    out.result(data, lambda o: o.line(str(data.get("log_tail") or record.job_id)))
    if data.get("state") == "failed":
        sys.exit(1)


def register(cli: click.Group) -> None:
    cli.add_command(fetch)
