"""The dashboard's FastAPI app: server-rendered pages, htmx fragments, server-sent events and the answer buttons.

Routes (all HTML unless said otherwise):

- ``GET /``: every campaign in the ledger (rendered on the server; the live stream only refreshes the table).
- ``GET /campaigns/{id}``: one campaign: status, pending approvals and lab-failure decisions with their buttons, the
  funnel, best so far of main and control arms, the lab stations' Gantt, process rewards over the iterations, the
  newest lab results, and every model call with the messages the model saw and what it answered.
- ``GET /campaigns/{id}/fragments/{panel}``: one panel of that page, for htmx to swap in.
- ``GET /events``, ``GET /campaigns/{id}/events``: ``text/event-stream``; an event each time the ledger changes
  what the page shows (``sse``).
- ``GET /campaigns/{id}/plots/{name}.png``: a figure (``plots``).
- ``POST /campaigns/{id}/approve`` (form fields ``job_key``, repeated: those approved, the rest denied; all when
  none is given), ``POST /campaigns/{id}/reject``, ``POST /campaigns/{id}/decide`` (form field ``action``: retry,
  skip or abort), each with an optional form field ``by`` (who answers; blank: no name, recorded as ``human``,
  else as ``human:NAME``): the answers ``closedloop run`` and ``closedloop mcp`` give, through the same code
  (``BackgroundRuns.approve`` / ``decide``: resume the campaign, then ``run(approval=...)``), so the spec's policies
  decide what may be answered and the graph records ``Approved`` / ``Rejected`` / ``FailureHandled``. The campaign
  then runs on in this server, as it would in the MCP server.

A campaign id may hold any character (``Pd/C screen``, ``?``, ``#``, ``%``, unicode): the pages write it as one
percent-encoded path segment (the ``segment`` filter, ``/`` as ``%2F``), and the app routes on the raw path with
``%2F`` and ``%25`` still encoded (``_SegmentedPaths``), so an id's ``/`` never splits the route and each handler
decodes the id exactly (``unquote``). An unknown campaign is a 404 naming the campaigns there. Access rules are in
``auth``.

Example:
    >>> from fastapi.testclient import TestClient
    >>> with TestClient(create_app(":memory:"), base_url="http://127.0.0.1") as client:
    ...     client.get("/").status_code, client.get("/campaigns/nope").status_code
    (200, 404)
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any
from urllib.parse import quote, unquote, urlencode

from fastapi import Depends, FastAPI, Form, HTTPException, Request
from fastapi.responses import (
    HTMLResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
)

from orchestrator.interfaces.background import FAILURE_ACTIONS, BackgroundRuns
from orchestrator.interfaces.dashboard import auth, views
from orchestrator.interfaces.dashboard.plots import PLOT_NAMES, PlotCache
from orchestrator.interfaces.dashboard.sse import (
    campaign_signature,
    changes,
    ledger_signature,
)
from orchestrator.replay.report import format_value
from vocabulary.domain import ClosedLoopError, import_optional

if TYPE_CHECKING:
    from orchestrator.ledger import Ledger

__all__ = ["PANELS", "PURPOSE", "create_app"]

PURPOSE = "closedloop dashboard"
PANELS = ("status", "approvals", "plots", "results", "llm_calls")
"""The fragments of a campaign page, in page order."""

_HERE = Path(__file__).parent


def segment(text: Any) -> str:
    """``text`` as one URL path segment: every character but the unreserved ones percent-encoded, ``/`` included.

    Example:
        >>> segment("Pd/C screen?#%é")
        'Pd%2FC%20screen%3F%23%25%C3%A9'
    """
    return quote(str(text), safe="")


_KEPT_ENCODED = re.compile(r"(%2[fF]|%25)")


def routed_path(raw_path: str) -> str:
    """The path to route on: ``raw_path`` percent-decoded, except ``%2F`` and ``%25``, which stay encoded, so a
    ``/`` inside a segment never splits it and ``unquote`` of a segment gives it back exactly.

    Example:
        >>> routed_path("/campaigns/Pd%2FC%20screen%2525/approve")
        '/campaigns/Pd%2FC screen%2525/approve'
    """
    parts = _KEPT_ENCODED.split(raw_path)
    return "".join(part.upper() if i % 2 else unquote(part) for i, part in enumerate(parts))


class _SegmentedPaths:
    """ASGI middleware: route on ``routed_path(raw_path)`` instead of the server's fully decoded path, in which an
    encoded ``/`` of a campaign id would already be a separator."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        raw = scope.get("raw_path") if scope["type"] in {"http", "websocket"} else None
        if raw:
            scope = dict(scope, path=routed_path(raw.decode("latin-1")))
        await self.app(scope, receive, send)


def _require_extra() -> None:
    """The dashboard's own dependencies, checked once, each naming the ``dashboard`` extra when missing."""
    import_optional("jinja2", "dashboard", PURPOSE)
    import_optional("matplotlib", "dashboard", PURPOSE)
    import_optional("fastapi.sse", "dashboard", PURPOSE)  # FastAPI >= 0.135


def create_app(
    db: str | Path | Ledger,
    *,
    token: str | None = None,
    runs: BackgroundRuns | None = None,
    poll_s: float = 1.0,
) -> FastAPI:
    """The dashboard of the ledger at ``db`` (a path, a URL or an open ``Ledger``, shared with ``runs``).

    Args:
        token: with a token every request must carry it (see ``auth``); without one only loopback hosts are served.
        runs: the background runs that answers continue campaigns in (default: new ones on the same ledger).
        poll_s: seconds between two reads of the ledger by a live stream.

    Raises:
        MissingDependency: the ``dashboard`` extra is not installed.
    """
    _require_extra()
    from fastapi.sse import EventSourceResponse
    from fastapi.staticfiles import StaticFiles
    from fastapi.templating import Jinja2Templates

    from orchestrator.ledger import Ledger

    ledger = db if isinstance(db, Ledger) else Ledger.open(db)
    runs = runs or BackgroundRuns(ledger)
    plots = PlotCache()
    templates = Jinja2Templates(directory=_HERE / "templates")
    templates.env.filters["fmt"] = format_value
    templates.env.filters["segment"] = segment
    app = FastAPI(title="closedloop dashboard", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.ledger, app.state.runs = ledger, runs
    app.add_middleware(_SegmentedPaths)
    app.mount("/static", StaticFiles(directory=_HERE / "static"), name="static")

    @app.middleware("http")
    async def access(request: Request, call_next):
        host = request.headers.get("host", "")
        if token is None and not auth.is_allowed_host(host):
            return PlainTextResponse(f"this dashboard serves loopback hosts only, not {host!r}; open it as "
                                     "http://127.0.0.1:PORT, or start it with a token", status_code=400)
        if token is not None:
            given = auth.token_of(request.headers.get("authorization"), request.cookies.get(auth.COOKIE),
                                  request.query_params.get("token"))
            if not auth.matches(given, token):
                return PlainTextResponse("this dashboard needs its token: open it once with ?token=<token> or send "
                                         "'Authorization: Bearer <token>'", status_code=401)
            if request.method == "GET" and "token" in request.query_params:
                query = urlencode([(k, v) for k, v in request.query_params.multi_items() if k != "token"])
                path = auth.local_path(request.scope.get("raw_path", b"").decode("latin-1") or request.url.path)
                response = RedirectResponse(path + (f"?{query}" if query else ""), status_code=303)
                response.set_cookie(auth.COOKIE, token, httponly=True, samesite="strict",
                                    secure=request.url.scheme == "https")
                return response
        if request.method == "POST" and not auth.is_same_origin(request.headers.get("origin"), host):
            return PlainTextResponse("cross-site form posts are refused; answer from the dashboard's own page",
                                     status_code=403)
        return await call_next(request)

    def known(campaign_id: str) -> str:
        """The campaign id of a route's ``{campaign_id}`` segment (``routed_path`` left ``%2F`` / ``%25`` in it),
        which must have events here (else 404)."""
        campaign_id = unquote(campaign_id)
        if not ledger.n_events(campaign_id):
            raise HTTPException(404, f"campaign {campaign_id!r} has no events in {ledger.url}; campaigns there: "
                                     f"{ledger.campaign_ids_with_events()}")
        return campaign_id

    def run_state(campaign_id: str) -> str | None:
        run = runs.get(campaign_id)
        return None if run is None else run.state

    def panel_context(campaign_id: str, panel: str) -> dict[str, Any]:
        spec = views.spec_of(ledger, campaign_id)
        context: dict[str, Any] = {"campaign_id": campaign_id, "n_events": ledger.n_events(campaign_id)}
        if panel == "status":
            context["status"] = views.campaign_status(ledger, runs, campaign_id, spec)
        elif panel == "approvals":
            context["pending"] = views.pending_questions(ledger, runs, campaign_id)
            context["actions"] = FAILURE_ACTIONS
        elif panel == "plots":
            context["plots"] = PLOT_NAMES
        elif panel == "results":
            context["results"] = views.lab_results(ledger, campaign_id)
        elif panel == "llm_calls":
            context["calls"] = views.llm_calls(ledger, campaign_id)
        return context

    @app.get("/", response_class=HTMLResponse)
    def campaign_list(request: Request):
        return templates.TemplateResponse(request, "campaigns.html",
                                          {"db": ledger.url, "campaigns": views.campaign_rows(ledger, runs)})

    @app.get("/fragments/campaigns", response_class=HTMLResponse)
    def campaign_table(request: Request):
        return templates.TemplateResponse(request, "_campaign_table.html",
                                          {"campaigns": views.campaign_rows(ledger, runs)})

    @app.get("/events", response_class=EventSourceResponse)
    async def campaign_list_events():
        async for event in changes(lambda: ledger_signature(ledger), poll_s=poll_s, event="campaigns"):
            yield event

    # every route's {campaign_id} goes through known: decoded exactly, and a 404 before anything (a stream) starts
    campaign_of_path = Depends(known)

    @app.get("/campaigns/{campaign_id}", response_class=HTMLResponse)
    def campaign_page(request: Request, campaign: str = campaign_of_path):
        context: dict[str, Any] = {"campaign_id": campaign, "panels": PANELS}
        for panel in PANELS:
            context.update(panel_context(campaign, panel))
        return templates.TemplateResponse(request, "campaign.html", context)

    @app.get("/campaigns/{campaign_id}/fragments/{panel}", response_class=HTMLResponse)
    def campaign_panel(request: Request, panel: str, campaign: str = campaign_of_path):
        if panel not in PANELS:
            raise HTTPException(404, f"no panel {panel!r}; panels: {list(PANELS)}")
        return templates.TemplateResponse(request, f"_{panel}.html", panel_context(campaign, panel))

    @app.get("/campaigns/{campaign_id}/events", response_class=EventSourceResponse)
    async def campaign_events(campaign: str = campaign_of_path):
        async for event in changes(lambda: campaign_signature(ledger, campaign, run_state(campaign)),
                                   poll_s=poll_s, event="campaign"):
            yield event

    @app.get("/campaigns/{campaign_id}/plots/{name}.png")
    def campaign_plot(name: str, campaign: str = campaign_of_path):
        if name not in PLOT_NAMES:
            raise HTTPException(404, f"no plot {name!r}; plots: {list(PLOT_NAMES)}")
        png = plots.png(ledger, campaign, name, spec=views.spec_of(ledger, campaign))
        return Response(png, media_type="image/png", headers={"Cache-Control": "no-cache"})

    def answered(request: Request, campaign_id: str, answer) -> Response:
        """Give the answer; htmx gets the approvals panel with what happened, a plain form a redirect (or 409)."""
        message, is_error = "", False
        try:
            run = answer()
            if run.state == "failed":
                message, is_error = f"the campaign failed after the answer: {run.error}", True
            else:
                message = "answer recorded; the campaign continues in this dashboard"
        except ClosedLoopError as exc:
            message, is_error = str(exc) or type(exc).__name__, True
        if request.headers.get("hx-request") != "true":
            if is_error:
                return PlainTextResponse(message, status_code=409)
            return RedirectResponse(f"/campaigns/{segment(campaign_id)}", status_code=303)
        context = panel_context(campaign_id, "approvals")
        context.update(message=message, is_error=is_error)
        return templates.TemplateResponse(request, "_approvals.html", context)

    @app.post("/campaigns/{campaign_id}/approve", response_class=HTMLResponse)
    def approve(request: Request, campaign: str = campaign_of_path,
                job_key: Annotated[list[str] | None, Form()] = None, n_jobs: Annotated[int | None, Form()] = None,
                by: Annotated[str | None, Form()] = None):
        keys = list(job_key or [])
        # The page's form says how many jobs it listed: all ticked is "approve all" (`--approve all`), none ticked
        # approves none. A client that sends no list approves the whole batch, as MCP's approve_dispatch does.
        approval: bool | list[str] = (keys or True) if n_jobs is None else True if len(keys) == n_jobs else keys
        return answered(request, campaign, lambda: runs.approve(campaign, approval, by=_name(by)))

    @app.post("/campaigns/{campaign_id}/reject", response_class=HTMLResponse)
    def reject(request: Request, campaign: str = campaign_of_path, by: Annotated[str | None, Form()] = None):
        return answered(request, campaign, lambda: runs.approve(campaign, False, by=_name(by)))

    @app.post("/campaigns/{campaign_id}/decide", response_class=HTMLResponse)
    def decide(request: Request, action: Annotated[str, Form()], campaign: str = campaign_of_path,
               by: Annotated[str | None, Form()] = None):
        return answered(request, campaign, lambda: runs.decide(campaign, action, by=_name(by)))

    return app


def _name(by: str | None) -> str | None:
    """The form's name field: a blank field (the page always sends it) is no name; any other text is checked by
    ``human_answer.checked_name`` when the answer is given."""
    return by if by and by.strip() else None
