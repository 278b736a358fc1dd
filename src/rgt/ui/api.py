"""The JSON API, the SSE stream and the one write (cancel) of `rgt ui`.

Errors are ``{"error", "fix"}`` with a status code. Nothing here reaches a machine but cancel:
logs and metrics come from what the patrol fetched (``fetched``), states from its last pass.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from rgt.errors import RgtError, UnknownJobError
from rgt.state.store import utcnow
from rgt.ui import views
from rgt.ui.metrics import Curves, read_jsonl, read_pulled, smooth
from rgt.ui.sweeps import sweep_doc as _sweep_doc

if TYPE_CHECKING:
    from rgt.ui.app import Ui

KEEPALIVE_S = 15.0


def routes() -> list[Route]:
    return [
        Route("/api/overview", overview),
        Route("/api/machines", machines),
        Route("/api/jobs", jobs),
        Route("/api/jobs/{job_id}", job),
        Route("/api/jobs/{job_id}/log", log),
        Route("/api/jobs/{job_id}/metrics", metrics),
        Route("/api/jobs/{job_id}/cancel", cancel, methods=["POST"]),
        Route("/api/curves", curves),
        Route("/api/sweeps/{name}", sweep),
        Route("/api/results", results),
        Route("/api/events", events),
    ]


def _ui(request: Request) -> Ui:
    found: Ui = request.app.state.ui
    return found


def error(status: int, message: str, fix: str) -> JSONResponse:
    return JSONResponse({"error": message, "fix": fix}, status_code=status)


def _int(request: Request, key: str, default: int) -> int:
    try:
        return int(request.query_params.get(key, default))
    except ValueError:
        return default


def page_args(request: Request) -> dict[str, Any]:
    q = request.query_params
    return {
        "page": _int(request, "page", 1),
        "per_page": _int(request, "per_page", views.PER_PAGE),
        "machine_name": q.get("machine") or None,
        "state": q.get("state") or None,
    }


def overview(request: Request) -> JSONResponse:
    ui = _ui(request)
    return JSONResponse(
        {
            "generated_at": utcnow(),
            "patrol_at": ui.patrol.at,
            "machines": views.machines(ui.patrol),
            "jobs": views.jobs_page(ui.patrol, **page_args(request)),
            "results": ui.findings.summary(),
        }
    )


def machines(request: Request) -> JSONResponse:
    return JSONResponse(views.machines(_ui(request).patrol))


def jobs(request: Request) -> JSONResponse:
    return JSONResponse(views.jobs_page(_ui(request).patrol, **page_args(request)))


def _unknown(job_id: str) -> JSONResponse:
    return error(404, f"no job {job_id!r} in this RGT_HOME", "list the jobs: `rgt status`")


def job(request: Request) -> JSONResponse:
    ui, job_id = _ui(request), request.path_params["job_id"]
    try:
        record = ui.store.job(job_id)
    except UnknownJobError:
        return _unknown(job_id)
    ui.patrol.files.want(job_id)
    return JSONResponse(views.job_detail(record, ui.patrol))


def log(request: Request) -> JSONResponse:
    ui, job_id = _ui(request), request.path_params["job_id"]
    try:
        ui.store.job(job_id)
    except UnknownJobError:
        return _unknown(job_id)
    return JSONResponse(views.log_tail(ui.patrol, job_id, _int(request, "lines", 200)))


_PARSED: OrderedDict[tuple[Any, ...], Curves] = OrderedDict()  # newest last; a few jobs only
_PARSED_LOCK = threading.Lock()  # sync routes run on a thread pool


def job_curves(ui: Ui, job_id: str) -> Curves:
    """The job's curves: the metrics file the patrol fetched, else the pulled copy's.

    Parsed once per version of the inputs (the fetched bytes' digest, the pulled copy's
    folder and mtime): a page's live refreshes do not re-parse 100,000 lines each time."""
    ui.patrol.files.want(job_id)
    found = ui.patrol.files.get(job_id)
    fetched = found.metrics if found is not None else None
    pull = ui.store.last_pull(job_id)
    dest = Path(pull["dest"]) if pull and Path(pull["dest"]).is_dir() else None
    key = (
        job_id,
        hashlib.sha1(fetched).hexdigest() if fetched is not None else None,
        (str(dest), dest.stat().st_mtime_ns) if dest is not None else None,
    )
    with _PARSED_LOCK:
        if key in _PARSED:
            _PARSED.move_to_end(key)
            return _PARSED[key]
    out = Curves()
    if fetched is not None:
        read_jsonl(fetched, f"{job_id}:outputs/metrics.jsonl", out)
    if dest is not None:
        read_pulled(dest, out, with_jsonl=not out.sources)
    with _PARSED_LOCK:
        _PARSED[key] = out
        while len(_PARSED) > 16:
            _PARSED.popitem(last=False)
    return out


def metrics(request: Request) -> Response:
    ui, job_id = _ui(request), request.path_params["job_id"]
    try:
        ui.store.job(job_id)
    except UnknownJobError:
        return _unknown(job_id)
    found = job_curves(ui, job_id)
    if found.body is None:  # serialized once per parse, like the parse itself
        found.body = json.dumps(found.to_json(), separators=(",", ":")).encode()
    return Response(found.body, media_type="application/json")


def curves(request: Request) -> JSONResponse:
    ui = _ui(request)
    metric = request.query_params.get("metric") or "loss"
    try:
        weight = float(request.query_params.get("smooth") or 0)
    except ValueError:
        return error(400, "smooth must be a number in [0, 1)", "e.g. smooth=0.6")
    runs = []
    for job_id in filter(None, (request.query_params.get("jobs") or "").split(",")):
        line = job_curves(ui, job_id).series.get(metric) or {"x": [], "y": []}
        runs.append({"job": job_id, "x": line["x"], "y": smooth(line["y"], weight)})
    return JSONResponse({"metric": metric, "smooth": weight, "runs": runs})


def sweep_doc(ui: Ui, name: str) -> dict[str, Any] | None:
    return _sweep_doc(ui.store, ui.patrol, name)


def sweep(request: Request) -> JSONResponse:
    name = request.path_params["name"]
    doc = sweep_doc(_ui(request), name)
    if doc is None:
        return error(404, f"no sweep {name!r} in this RGT_HOME", "run it: `rgt sweep run FILE`")
    return JSONResponse(doc)


def results(request: Request) -> JSONResponse:
    return JSONResponse(_ui(request).findings.results())


async def cancel(request: Request) -> Response:
    """The one write: the library call of `rgt cancel`, behind the header token, a JSON body
    (another site's form or ``text/plain`` fetch cannot send one without a preflight this
    server never grants) and a typed confirmation (the job id again), so a stray link or form
    cannot stop a run. Host and Origin were checked before (``auth.LocalOnly``)."""
    ui, job_id = _ui(request), request.path_params["job_id"]
    if request.app.state.token_required and "x-rgt-token" not in request.headers:
        return error(403, "cancel needs the X-RGT-Token header", "use the page's cancel button")
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "application/json":
        return error(415, "cancel takes a JSON body", f'send {{"confirm": "{job_id}"}} as JSON')
    try:
        body = await request.json()
    except ValueError:
        body = None
    if not isinstance(body, dict) or body.get("confirm") != job_id:
        return error(400, "confirmation missing", f'send {{"confirm": "{job_id}"}}')
    try:
        record = ui.store.job(job_id)
        data = await asyncio.to_thread(_cancel, ui, record.machine, job_id)
    except UnknownJobError:
        return _unknown(job_id)
    except RgtError as exc:
        return error(502, exc.message, exc.fix or "try `rgt cancel` at a terminal")
    return JSONResponse({"job": job_id, "cancel": data})


def _cancel(ui: Ui, machine: str, job_id: str) -> dict[str, Any]:
    from rgt.backends import backend_for

    data: dict[str, Any] = backend_for(ui.store, machine).cancel(job_id)
    return data


async def events(request: Request) -> StreamingResponse:
    patrol = _ui(request).patrol
    return StreamingResponse(
        _stream(request, patrol),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


async def _stream(request: Request, patrol: Any) -> AsyncIterator[str]:
    queue = patrol.subscribe()
    try:
        yield f"retry: 3000\nevent: hello\ndata: {json.dumps({'at': patrol.at})}\n\n"
        while not await request.is_disconnected():
            try:
                update = await asyncio.wait_for(queue.get(), KEEPALIVE_S)
            except asyncio.TimeoutError:
                yield ": keepalive\n\n"
                continue
            yield f"event: update\ndata: {json.dumps(update)}\n\n"
    finally:
        patrol.unsubscribe(queue)
