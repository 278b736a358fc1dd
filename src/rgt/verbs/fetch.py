"""``rgt fetch NAME SOURCE``: a download on the machine, started as a job (``rgt.fetch``), and
followed for a while when asked."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rgt.verbs.tell import QUIET, Tell

if TYPE_CHECKING:
    from rgt.fetch import FetchRequest
    from rgt.state.store import Store


def fetch(
    store: Store,
    name: str,
    request: FetchRequest,
    wait_s: float = 0,
    verify: bool = False,
    cache: str | None = None,
    tell: Tell = QUIET,
) -> dict[str, Any]:
    """Start the download (``verify``: a check of the HF cache already on NAME instead), then
    probe it for ``wait_s`` seconds: its state and log tail join the document."""
    from rgt.fetch import start_fetch, start_verify
    from rgt.jobs.launch import probe

    if verify:
        record, target = start_verify(store, name, request.source, cache), cache or "the HF cache"
    else:
        record, target = start_fetch(store, name, request)
    tell.info(f"fetch {record.job_id} on {name} -> {target}; follow with `rgt watch {name}`")
    data = {"job_id": record.job_id, "machine": name, "source": request.source, "to": target}
    if wait_s > 0:
        result = probe(store, record.job_id, wait_s)
        data.update(state=result.state.value, log_tail=result.log_tail)
    return data
