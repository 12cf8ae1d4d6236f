"""The dashboard's FastAPI app: server-rendered pages, htmx fragments, server-sent events and the answer buttons.

Routes (all HTML unless said otherwise):

- ``GET /``: every campaign in the ledger (rendered on the server; the live stream only refreshes the table).
- ``GET /campaigns/{id}``: one campaign: status (``waiting for approval`` / ``waiting for results`` as such), the
  target of a target objective, the best so far with its uncertainty and structure, pending approvals and lab-failure
  decisions with their buttons, the results form of a manual lab, the funnel, best so far of main and control arms,
  the lab stations' Gantt, process rewards over the iterations (for several objectives also the measured Pareto front:
  its plot, hypervolume curve and non-dominated candidates), the sortable table of lab results, and every model
  call with the messages the model saw and what it answered. Candidates are named by ``pool.describe`` (SMILES,
  formula, name=value pairs), never by their InChIKey-like ids.
- ``GET /campaigns/{id}/fragments/{panel}``: one panel of that page, for htmx to swap in.
- ``GET /events``, ``GET /campaigns/{id}/events``: ``text/event-stream``; an event each time the ledger changes
  what the page shows (``sse``).
- ``GET /campaigns/{id}/plots/{name}.png``: a figure (``plots``).
- ``GET /campaigns/{id}/candidates/{candidate_id}.svg``: a candidate's structure (``space.depiction``), or 404.
- ``POST /campaigns/{id}/approve``: per listed job a ``job`` field, its ``choice:KEY`` (``approve`` or ``reject``,
  no default: a job without one refuses the whole answer) and ``reason:KEY`` (why, for a rejection); the older
  form (``job_key`` repeated, those approved, with ``n_jobs``) is still read. ``POST /campaigns/{id}/reject``
  (optional ``reason``) denies the batch, ``POST /campaigns/{id}/decide`` (form field ``action``: retry, skip or
  abort) answers failed jobs; each takes an optional form field ``by`` (who answers; blank: no name, recorded as
  ``human``, else as ``human:NAME``): the answers ``closedloop run`` and ``closedloop mcp`` give, through the same
  code (``BackgroundRuns.approve`` / ``decide``: resume the campaign, then ``run(approval=...)``, reasons in
  ``human_answer``'s wrapped form), so the spec's policies decide what may be answered and the graph records
  ``Approved`` / ``Rejected`` / ``FailureHandled``. The campaign then runs on in this server, as in the MCP server.
- ``POST /campaigns/{id}/results`` (a manual lab): per job ``value:KEY``, ``sd:KEY``, ``failed:KEY`` and
  ``reason:KEY``; blank rows stay pending; recorded by ``manual_results.add_results``, whose receipt the panel
  shows. ``POST /campaigns/{id}/continue`` runs the campaign on (``BackgroundRuns.resume``, as ``closedloop run
  --resume``): it reads the entered results and dispatches the next batch.

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
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import (
    HTMLResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
)

from orchestrator.interfaces.background import FAILURE_ACTIONS, BackgroundRuns
from orchestrator.interfaces.dashboard import auth, views
from orchestrator.interfaces.dashboard.plots import PlotCache, plot_names
from orchestrator.interfaces.dashboard.sse import (
    campaign_signature,
    changes,
    ledger_signature,
)
from orchestrator.replay.report import format_value
from vocabulary.domain import ClosedLoopError, SetupError, import_optional

if TYPE_CHECKING:
    from orchestrator.ledger import Ledger

__all__ = ["PANELS", "PURPOSE", "create_app"]

PURPOSE = "closedloop dashboard"
PANELS = ("status", "approvals", "entry", "plots", "results", "llm_calls")
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
    templates.env.filters["status_text"] = views.status_text
    templates.env.filters["measured"] = views.measured
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
            context["plots"] = plot_names(spec)
            context["front"] = views.pareto_front(ledger, campaign_id, spec)
        elif panel == "entry":
            context["entries"] = views.pending_entries(ledger, campaign_id, spec)
            context["status"] = views.campaign_status(ledger, runs, campaign_id, spec)
            context["property"] = spec.objective.property
        elif panel == "results":
            context["results"] = views.lab_results(ledger, campaign_id, spec)
        if panel in {"approvals", "entry", "results"}:
            context["unit"] = spec.objective.unit or ""
        elif panel == "llm_calls":
            context["calls"] = views.llm_calls(ledger, campaign_id)
            context["model_stats"] = views.model_stats(ledger, campaign_id)
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
        spec = views.spec_of(ledger, campaign)
        if name not in plot_names(spec):
            raise HTTPException(404, f"no plot {name!r}; plots: {list(plot_names(spec))}")
        png = plots.png(ledger, campaign, name, spec=spec)
        return Response(png, media_type="image/png", headers={"Cache-Control": "no-cache"})

    @app.get("/campaigns/{campaign_id}/candidates/{candidate_id}.svg")
    def candidate_drawing(candidate_id: str, campaign: str = campaign_of_path):
        svg = views.candidate_drawing(ledger, campaign, unquote(candidate_id))
        if svg is None:
            raise HTTPException(404, "no drawing of that candidate: it is not a molecule, or not in this campaign")
        # a candidate's structure never changes: the browser keeps its drawing
        return Response(svg, media_type="image/svg+xml", headers={"Cache-Control": "max-age=86400"})

    def answered(request: Request, campaign_id: str, answer, *, panel: str = "approvals",
                 done: str = "answer recorded; the campaign continues in this dashboard") -> Response:
        """Give the answer; htmx gets ``panel`` with what happened, a plain form a redirect (or 409)."""
        message, is_error = "", False
        try:
            run = answer()
            if isinstance(run, str):
                message = run
            elif run.state == "failed":
                message, is_error = f"the campaign failed after the answer: {run.error}", True
            else:
                message = done
        except ClosedLoopError as exc:
            message, is_error = str(exc) or type(exc).__name__, True
        if request.headers.get("hx-request") != "true":
            if is_error:
                return PlainTextResponse(message, status_code=409)
            return RedirectResponse(f"/campaigns/{segment(campaign_id)}", status_code=303)
        context = panel_context(campaign_id, panel)
        context.update(message=message, is_error=is_error)
        return templates.TemplateResponse(request, f"_{panel}.html", context)

    @app.post("/campaigns/{campaign_id}/approve", response_class=HTMLResponse)
    async def approve(request: Request, campaign: str = campaign_of_path):
        form = await request.form()
        by = _name(form.get("by"))
        if any(name.startswith(CHOICE) for name in form):
            try:
                approval, reasons = choices_of(form)
            except ClosedLoopError as exc:
                return await run_in_threadpool(answered, request, campaign, _raiser(exc))
            return await run_in_threadpool(answered, request, campaign,
                                           lambda: runs.approve(campaign, _with_reasons(approval, reasons=reasons), by=by))
        # The older form: ticked ``job_key`` boxes and the number of jobs listed (all ticked is "approve all", none
        # ticked approves none). A client that sends no list approves the whole batch, as MCP's approve_dispatch does.
        keys = [str(k) for k in form.getlist("job_key")]
        n_jobs = form.get("n_jobs")
        approval: bool | list[str] = (keys or True) if not n_jobs else True if len(keys) == int(n_jobs) else keys
        return await run_in_threadpool(answered, request, campaign, lambda: runs.approve(campaign, approval, by=by))

    @app.post("/campaigns/{campaign_id}/reject", response_class=HTMLResponse)
    def reject(request: Request, campaign: str = campaign_of_path, by: Annotated[str | None, Form()] = None,
               reason: Annotated[str | None, Form()] = None):
        why = reason.strip() if reason else ""
        return answered(request, campaign, lambda: runs.approve(campaign, _with_reasons(False, reason=why),
                                                                 by=_name(by)))

    @app.post("/campaigns/{campaign_id}/decide", response_class=HTMLResponse)
    def decide(request: Request, action: Annotated[str, Form()], campaign: str = campaign_of_path,
               by: Annotated[str | None, Form()] = None):
        return answered(request, campaign, lambda: runs.decide(campaign, action, by=_name(by)))

    @app.post("/campaigns/{campaign_id}/results", response_class=HTMLResponse)
    async def enter_results(request: Request, campaign: str = campaign_of_path):
        form = await request.form()
        spec = views.spec_of(ledger, campaign)
        try:
            rows = entered_rows(form, spec.objective.property)
        except ClosedLoopError as exc:
            return await run_in_threadpool(answered, request, campaign, _raiser(exc), panel="entry")
        return await run_in_threadpool(answered, request, campaign,
                                       lambda: _add_results(ledger, campaign, rows, by=_name(form.get("by"))),
                                       panel="entry")

    @app.post("/campaigns/{campaign_id}/continue", response_class=HTMLResponse)
    def continue_campaign(request: Request, campaign: str = campaign_of_path):
        return answered(request, campaign, lambda: runs.resume(campaign), panel="entry",
                        done="the campaign plans its next batch in this dashboard")

    return app


CHOICE, REASON, VALUE, SD, FAILED = "choice:", "reason:", "value:", "sd:", "failed:"
"""Form field prefixes, each followed by a job key: the approval's choice (approve / reject) and rejection reason
per job, and an entered result's value, sd and failure reason per job."""


class IncompleteAnswer(SetupError):
    """A form left a job without the answer it needs (an approval without a choice, a result that is not a number)."""


def choices_of(form: Any) -> tuple[bool | list[str], dict[str, str]]:
    """The approval (True: all, False: none, else the approved job keys) and the reason per rejected job key (blank
    reasons left out) from the approval form: a ``job`` field per listed job, in order, and its ``choice:KEY``
    (``approve`` or ``reject``, no default) and ``reason:KEY``.

    Example:
        >>> choices_of({"job": ["c/A", "c/B"], "choice:c/A": "approve", "choice:c/B": "reject", "reason:c/B": "toxic"})
        (['c/A'], {'c/B': 'toxic'})
    """
    keys = [str(k) for k in (form.getlist("job") if hasattr(form, "getlist") else form.get("job", []))]
    choice = {key: str(form.get(CHOICE + key, "")) for key in keys}
    missing = [key for key in keys if choice[key] not in {"approve", "reject"}]
    if missing or not keys:
        raise IncompleteAnswer(f"choose approve or reject for every candidate of the batch: {len(missing)} of "
                               f"{len(keys)} have no choice yet")
    approved = [key for key in keys if choice[key] == "approve"]
    reasons = {key: str(form.get(REASON + key, "")).strip() for key in keys if choice[key] == "reject"}
    approval: bool | list[str] = True if len(approved) == len(keys) else approved or False
    return approval, {key: why for key, why in reasons.items() if why}


def entered_rows(form: Any, prop: str) -> list[dict[str, Any]]:
    """The result rows of the entry form, one per job with a value (``value:KEY``, optional ``sd:KEY``) or ticked as
    failed (``failed:KEY``, with ``reason:KEY``); jobs left blank are left out (they stay pending).

    Example:
        >>> entered_rows({"job": ["c/A", "c/B", "c/C"], "value:c/A": "71.5", "sd:c/A": "", "value:c/B": "",
        ...               "failed:c/C": "on", "reason:c/C": "tar"}, "yield")
        [{'job': 'c/A', 'yield': 71.5}, {'job': 'c/C', 'status': 'failed', 'reason': 'tar'}]
    """
    import math

    keys = [str(k) for k in (form.getlist("job") if hasattr(form, "getlist") else form.get("job", []))]
    rows: list[dict[str, Any]] = []
    for key in keys:
        text, sd_text = str(form.get(VALUE + key, "")).strip(), str(form.get(SD + key, "")).strip()
        if form.get(FAILED + key):
            rows.append({"job": key, "status": "failed", "reason": str(form.get(REASON + key, "")).strip() or
                         "failed (entered in the dashboard)"})
            continue
        if not text:
            continue
        try:
            value = float(text)
            sd = float(sd_text) if sd_text else None
        except ValueError:
            raise IncompleteAnswer(f"{text!r} (or its sd {sd_text!r}) is not a number; enter the {prop} as a number "
                                   f"such as 71.5, or tick 'failed'") from None
        if not math.isfinite(value) or (sd is not None and (not math.isfinite(sd) or sd < 0)):
            raise IncompleteAnswer(f"enter a finite {prop} and a non-negative sd, not {text!r} ± {sd_text!r}")
        rows.append({"job": key, prop: value, **({"uncertainty": sd} if sd is not None else {})})
    if not rows:
        raise IncompleteAnswer(f"enter a {prop} for at least one job (or tick 'failed' for a run that failed)")
    return rows


def _add_results(ledger: Ledger, campaign_id: str, rows: list[dict[str, Any]], *, by: str | None) -> str:
    """Record the rows (``manual_results.add_results``) and say per row what happened (its receipt)."""
    from orchestrator.loop.manual_results import add_results

    return add_results(ledger, campaign_id, rows, by=by).text()


def _with_reasons(approval: bool | list[str], **reasons: Any) -> Any:
    """The approval wrapped with the rejection reasons that are not blank (``{"answer": ..., "reasons": {job_key:
    why}}`` and/or ``"reason": why``, ``loop.human_answer``), or the plain approval when there are none."""
    given = {name: value for name, value in reasons.items() if value}
    return {"answer": approval, **given} if given else approval


def _raiser(exc: BaseException):
    def give():
        raise exc
    return give


def _name(by: str | None) -> str | None:
    """The form's name field: a blank field (the page always sends it) is no name; any other text is checked by
    ``human_answer.checked_name`` when the answer is given."""
    return by if by and by.strip() else None
