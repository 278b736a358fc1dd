"""The Starlette app of `rgt ui`: HTML pages, fragments, the JSON API and the SSE stream.

Read-only but for one route (``POST /api/jobs/{id}/cancel``, the same library call as `rgt
cancel`, behind the token header and a typed confirmation). Every view is built from the state
DB and the one background patrol (``UiPatrol``); no request reaches a machine.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from rgt.errors import UnknownJobError
from rgt.state.store import Store
from rgt.ui import api, views
from rgt.ui.auth import LocalOnly, TokenGate
from rgt.ui.findings import Findings
from rgt.ui.pages import not_found, render
from rgt.ui.patrol import UiPatrol

STATIC = Path(__file__).resolve().parent / "static"


@dataclass(frozen=True)
class Ui:
    store: Store
    patrol: UiPatrol
    findings: Findings


def ui_of(request: Request) -> Ui:
    found: Ui = request.app.state.ui
    return found


def create_app(
    home: Path,
    token: str | None,
    patrol_interval_s: float = 5.0,
    results: tuple[Path, ...] = (),
    run_patrol: bool = True,
) -> Starlette:
    store = Store.open(home / "state.db")
    ui = Ui(store, UiPatrol(store, patrol_interval_s), Findings(home, results))

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        task = asyncio.create_task(ui.patrol.run()) if run_patrol else None
        asyncio.get_running_loop().run_in_executor(None, ui.findings.refresh)  # warm it
        try:
            yield
        finally:
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    app = Starlette(routes=[*page_routes(), *api.routes()], lifespan=lifespan)
    app.state.ui = ui
    app.state.token_required = token is not None
    app.add_middleware(TokenGate, token=token)
    app.add_middleware(LocalOnly, token_required=token is not None)  # runs before the token
    app.add_middleware(ServerTiming)
    return app


class ServerTiming:
    """``Server-Timing: app;dur=MS`` on every response: the time the app spent before it
    answered (what bench/bench_ui_server.py reports; a browser's devtools show it too)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()

        async def timed(message: Message) -> None:
            if message["type"] == "http.response.start":
                spent = f"app;dur={(time.perf_counter() - start) * 1000:.1f}".encode()
                message = {
                    **message,
                    "headers": [*message.get("headers", []), (b"server-timing", spent)],
                }
            await send(message)

        await self.app(scope, receive, timed)


def page_routes() -> list[Route | Mount]:
    routes: list[Route | Mount] = [
        Route("/", overview),
        Route("/jobs/{job_id}", job_page),
        Route("/machines/{name}", machine_page),
        Route("/sweeps/{name}", sweep_page),
        Route("/results", results_page),
        Route("/explain/{key}", explain_page),
        Route("/fragments/machines", machines_fragment),
        Route("/fragments/jobs", jobs_fragment),
        Route("/fragments/job/{job_id}", job_fragment),
    ]
    routes.append(Mount("/static", StaticFiles(directory=str(STATIC), check_dir=False)))
    return routes


def overview(request: Request) -> HTMLResponse:
    ui = ui_of(request)
    return render(
        "overview.html",
        page="overview",
        machines=views.machines(ui.patrol),
        jobs=views.jobs_page(ui.patrol, **api.page_args(request)),
        results=ui.findings.summary(),
        patrol_at=ui.patrol.at,
    )


def job_page(request: Request) -> HTMLResponse:
    ui = ui_of(request)
    try:
        record = ui.store.job(request.path_params["job_id"])
    except UnknownJobError:
        return not_found("job", request.path_params["job_id"])
    ui.patrol.files.want(record.job_id)
    job = views.job_detail(record, ui.patrol)
    log = views.log_tail(ui.patrol, record.job_id, 200)
    curves = api.job_curves(ui, record.job_id)
    return render("job.html", page="job", job=job, log=log, curves=curves)


def machine_page(request: Request) -> HTMLResponse:
    ui = ui_of(request)
    name = request.path_params["name"]
    found = [m for m in ui.store.machines() if m.name == name]
    if not found:
        return not_found("machine", name)
    return render(
        "machine.html",
        page="machine",
        machine=views.machine(found[0], ui.patrol),
        jobs=views.jobs_page(ui.patrol, **{**api.page_args(request), "machine_name": name}),
    )


def sweep_page(request: Request) -> HTMLResponse:
    ui = ui_of(request)
    name = request.path_params["name"]
    doc = api.sweep_doc(ui, name)
    if doc is None:
        return not_found("sweep", name)
    return render("sweep.html", page="sweep", name=name, sweep=doc)


def results_page(request: Request) -> HTMLResponse:
    return render("results.html", page="results", results=ui_of(request).findings.results())


def explain_page(request: Request) -> HTMLResponse:
    """An `rgt explain` entry (a triage label, a lint code, an event, a topic), linked from
    the labels and events the pages show."""
    from rgt import knowledge

    key = request.path_params["key"]
    try:
        entry = knowledge.lookup(key)
    except ValueError:
        return not_found("explain entry", key)
    return render("explain.html", page="explain", entry=entry)


def machines_fragment(request: Request) -> HTMLResponse:
    return render("_machines.html", machines=views.machines(ui_of(request).patrol))


def jobs_fragment(request: Request) -> HTMLResponse:
    jobs = views.jobs_page(ui_of(request).patrol, **api.page_args(request))
    return render("_jobs.html", jobs=jobs)


def job_fragment(request: Request) -> Response:
    ui = ui_of(request)
    try:
        record = ui.store.job(request.path_params["job_id"])
    except UnknownJobError:
        return not_found("job", request.path_params["job_id"])
    return render("_job.html", job=views.job_detail(record, ui.patrol))
