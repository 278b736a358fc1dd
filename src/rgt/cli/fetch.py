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
    from rgt.fetch import FetchRequest
    from rgt.verbs.fetch import fetch as start
    from rgt.verbs.tell import Tell

    token_env = None
    if token_stdin:
        os.environ[TOKEN_VAR] = sys.stdin.readline().strip()  # this process only, sent by stdin
        token_env = TOKEN_VAR
    request = FetchRequest(source, includes, to, token_env, sha256, max_bytes)
    tell = Tell(warn=out.warn, info=out.info)
    data = start(Store.open(), name, request, wait_s, verify, cache, tell)
    out.result(data, lambda o: o.line(str(data.get("log_tail") or data["job_id"])))
    if data.get("state") == "failed":
        sys.exit(1)


def register(cli: click.Group) -> None:
    cli.add_command(fetch)
