"""The remote lab: any ``InstrumentDriver`` served over HTTP (FastAPI + uvicorn), with a journal that survives restarts.

``create_app(driver)`` exposes the six verbs and the safety envelope as REST endpoints, documented at
``/openapi.json``:

========================  ==============================  ===============================================
``POST /jobs``            submit (idempotent on job_key)  ``JobInfo``; 409 key reused, 422 out of envelope or
                                                          a candidate whose id is not its chemistry's
``GET /jobs/{key}``       status                          ``JobInfo``; 404 unknown
``GET /jobs/{key}/result``  result                        ``LabResult``; 409 unfinished or cancelled
``POST /jobs/{key}/cancel``  cancel                       ``JobInfo``
``GET /health``           health                          the driver's dict plus a ``server`` section
``GET /capabilities``     capabilities                    the driver's dict plus a ``server`` section
``GET /envelope``         the driver's safety envelope    ``SafetyEnvelope``
========================  ==============================  ===============================================

Errors come back as ``ErrorBody`` (``error``, ``message``, ``violations``), an unknown path (404 ``not_found``) and a
method a path does not have (405 ``method_not_allowed``, with ``Allow``) too. With ``token`` set, every endpoint but
``/openapi.json`` and ``/docs`` needs ``Authorization: Bearer <token>`` (401 otherwise); without one the schema
declares no security. The server checks the envelope itself before the driver sees a job, and the driver checks again.
A job's candidate is parsed again (``request_checks.candidate_problem``): an invalid SMILES or formula, or an id that
is not its chemistry's, is 422 ``invalid_candidate``; a job that is not valid under the published schema is 422
``invalid_job`` (the body is validated as strict JSON, so ``true`` is not an integer); a body over ``max_body_bytes``
(1 MB) is 413.

**Contract.** ``/openapi.json`` says what the server does (``instruments.http_contract``): each route lists the
statuses it returns, a candidate's ``type`` is required, and links lead from a job's ``job_key`` to its status,
result and cancellation. ``tests/instruments/test_server_contract.py`` holds the server to it with schemathesis.

**Journal and time** are ``lab_service.LabService``'s: accepted jobs are journaled (SQLite) so a restarted server
loses none, and a simulated lab's clock advances in step with the wall clock.

Example:
    >>> from instruments.simlab import SimLabDriver
    >>> app = create_app(SimLabDriver(oracle=lambda c: 1.0), token="s3cret")
    >>> sorted(path for path in app.openapi()["paths"])  # doctest: +NORMALIZE_WHITESPACE
    ['/capabilities', '/envelope', '/health', '/jobs', '/jobs/{job_key}', '/jobs/{job_key}/cancel',
     '/jobs/{job_key}/result']
"""

import contextlib
import hashlib
import hmac
import ipaddress
import logging
import threading
import time
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Annotated, Any

from pydantic import ValidationError

from instruments.base import InstrumentDriver, LabJob, LabResult
from instruments.envelope import SafetyEnvelope
from instruments.http_contract import (
    error_responses,
    forbid_shadowed_keys,
    job_examples,
    job_links,
    require_discriminators,
    shadowed_key_problem,
)
from instruments.lab_service import (
    DEFAULT_SECONDS_PER_SIM_HOUR,
    ApiError,
    ErrorBody,
    ErrorKind,
    JobInfo,
    LabService,
)
from instruments.oracle import FunctionOracle, TableOracle
from instruments.request_checks import DEFAULT_MAX_BODY_BYTES, BodySizeLimit
from vocabulary.domain import InstrumentFault, SetupError

try:
    import uvicorn
    from fastapi import Body, Depends, FastAPI, Request
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse
    from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
    from starlette.exceptions import HTTPException
except ImportError as exc:  # pragma: no cover - depends on the install
    raise SetupError(f"the lab server needs fastapi and uvicorn ({exc}); pip install fastapi uvicorn") from exc

__all__ = [
    "ServerThread",
    "build_driver",
    "check_exposure",
    "create_app",
    "demo_oracle",
    "run_server",
    "serve",
]

log = logging.getLogger(__name__)


def _errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    return error_responses(*codes, model=ErrorBody)


_HTTP_ERROR_KINDS: dict[int, ErrorKind] = {404: "not_found", 405: "method_not_allowed"}


def create_app(
    driver: InstrumentDriver,
    *,
    token: str | None = None,
    journal_path: str | Path | None = None,
    seconds_per_sim_hour: float = DEFAULT_SECONDS_PER_SIM_HOUR,
    tick_s: float = 0.005,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
) -> FastAPI:
    """A FastAPI app serving ``driver``; see the module docstring for the endpoints.

    Args:
        driver: the lab to serve (any ``InstrumentDriver``).
        token: bearer token every request must carry; None serves without authentication (bind to 127.0.0.1 then).
        journal_path: SQLite journal that survives restarts; None keeps it in memory.
        seconds_per_sim_hour: real seconds per simulated hour, for a simulated driver.
        tick_s: real seconds between clock advances and status polls.
        max_body_bytes: larger request bodies are refused with 413 before they are parsed.
    """
    service = LabService(driver, journal_path=journal_path, seconds_per_sim_hour=seconds_per_sim_hour, tick_s=tick_s)
    bearer = HTTPBearer(auto_error=False, description=f"the token the server was started with (${TOKEN_ENV})")

    async def require_token(credentials: HTTPAuthorizationCredentials | None = Depends(bearer)) -> None:
        if token is None:
            return
        if credentials is None or not hmac.compare_digest(credentials.credentials.encode(), token.encode()):
            raise ApiError(
                401, "unauthorized",
                "this lab server needs a bearer token; pass the one it was started with "
                "(HttpDriver(url, token=...) or the header 'Authorization: Bearer <token>')",
            )

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await service.start()
        try:
            yield
        finally:
            await service.stop()

    app = FastAPI(
        title=f"closedloop lab: {driver.name}",
        version=str(getattr(driver, "version", "0")),
        description="A closedloop instrument driver served over HTTP. Job keys are idempotency keys.",
        lifespan=lifespan,
        # Without a token the schema declares no security scheme and no 401: it says what the server requires.
        dependencies=[Depends(require_token)] if token is not None else [],
        responses=_errors(401, 413) if token is not None else _errors(413),
    )
    app.state.lab = service
    fastapi_openapi = app.openapi

    def openapi() -> dict[str, Any]:
        return forbid_shadowed_keys(require_discriminators(fastapi_openapi()))

    app.openapi = openapi  # type: ignore[method-assign]

    @app.exception_handler(ApiError)
    async def _api_error(request: Request, exc: ApiError) -> JSONResponse:
        headers = {"WWW-Authenticate": "Bearer"} if exc.status_code == 401 else None
        return JSONResponse(exc.body.model_dump(), status_code=exc.status_code, headers=headers)

    @app.exception_handler(RequestValidationError)
    async def _invalid_job(request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = [f"{'.'.join(str(part) for part in e['loc'])}: {e['msg']}" for e in exc.errors()[:5]]
        message = f"the request is malformed ({'; '.join(problems)}); see /openapi.json for the LabJob schema"
        return JSONResponse(ErrorBody(error="invalid_job", message=message).model_dump(), status_code=422)

    @app.exception_handler(HTTPException)
    async def _http_error(request: Request, exc: HTTPException) -> JSONResponse:
        kind = _HTTP_ERROR_KINDS.get(exc.status_code, "http_error")
        message = f"{request.method} {request.url.path}: {exc.detail}"
        if exc.status_code == 404:
            message += "; the lab's routes are listed at /openapi.json"
        elif exc.status_code == 405:
            message += f"; this path allows {(exc.headers or {}).get('Allow', 'other methods')}"
        body = ErrorBody(error=kind, message=message).model_dump()
        return JSONResponse(body, status_code=exc.status_code, headers=exc.headers)

    app.add_middleware(BodySizeLimit, max_bytes=max_body_bytes)

    @app.post(
        "/jobs", response_model=JobInfo, summary="Submit a job (idempotent on job_key)", operation_id="submit_job",
        responses={**_errors(400, 409, 422, 503), 200: {"links": job_links("job_status", "job_result", "cancel_job")}},
    )
    async def submit(job: Annotated[LabJob, Body(openapi_examples=job_examples())], request: Request) -> JobInfo:
        # FastAPI validates in pydantic's lax Python mode, where JSON `true` passes as the integer 1 and "1" as 1.
        # The lab takes only what its published schema allows: the body again, as strict JSON.
        try:
            job = LabJob.model_validate_json(await request.body(), strict=True)
        except ValidationError as exc:
            raise RequestValidationError([{**e, "loc": ("body", *e["loc"])} for e in exc.errors()]) from exc
        problem = shadowed_key_problem(job.job_key)
        if problem is not None:
            raise ApiError(422, "invalid_job", problem)
        return await service.submit(job)

    # The suffixed routes come first: a job key may contain '/', and '{job_key:job_key}' would swallow the suffix.
    # 422 is declared on every job route, also where only a malformed request could cause it, because FastAPI would
    # otherwise document its own validation body there, which this server never sends.
    @app.get(
        "/jobs/{job_key:job_key}/result", response_model=LabResult, summary="Result of a finished job",
        operation_id="job_result", responses=_errors(404, 409, 422, 503),
    )
    async def result(job_key: str) -> LabResult:
        return await service.result(job_key)

    @app.post(
        "/jobs/{job_key:job_key}/cancel", response_model=JobInfo, summary="Cancel a queued or running job",
        operation_id="cancel_job", responses={**_errors(404, 422, 503), 200: {"links": job_links("job_result")}},
    )
    async def cancel(job_key: str) -> JobInfo:
        return await service.cancel(job_key)

    @app.get(
        "/jobs/{job_key:job_key}", response_model=JobInfo, summary="Status of a job", operation_id="job_status",
        responses={**_errors(404, 422, 503), 200: {"links": job_links("job_result", "cancel_job")}},
    )
    async def status(job_key: str) -> JobInfo:
        return await service.status(job_key)

    @app.get("/health", summary="Liveness and load of the lab", operation_id="health")
    async def health() -> dict[str, Any]:
        return await service.health()

    @app.get("/capabilities", summary="Stations, steps and limits the lab offers", operation_id="capabilities")
    async def capabilities() -> dict[str, Any]:
        return await service.capabilities()

    @app.get(
        "/envelope", response_model=SafetyEnvelope, summary="The lab's safety envelope", operation_id="envelope"
    )
    async def envelope() -> SafetyEnvelope:
        return service.envelope

    return app


# ----------------------------------------------------------------------------------------------- running it
class _Server(uvicorn.Server):
    """uvicorn's server, telling a callback once it listens (its port is known then, also for port 0)."""

    def __init__(self, config: uvicorn.Config, on_started: Any = None) -> None:
        super().__init__(config)
        self._on_started = on_started
        self.port: int | None = None

    async def startup(self, sockets: Any = None) -> None:
        await super().startup(sockets=sockets)
        if self.started:
            self.port = int(self.servers[0].sockets[0].getsockname()[1])  # the real one, also for port 0
            if self._on_started is not None:
                self._on_started(self)


class ServerThread:
    """Serve an app with uvicorn in a background thread; for tests, notebooks and embedding.

    Example:
        >>> import httpx
        >>> from instruments.simlab import SimLabDriver
        >>> with ServerThread(create_app(SimLabDriver(oracle=lambda c: 1.0))) as server:
        ...     httpx.get(f"{server.url}/health").json()["is_ok"]
        True
    """

    def __init__(self, app: FastAPI, host: str = "127.0.0.1", port: int = 0, log_level: str = "warning") -> None:
        self.app = app
        self.host = host
        self._started = threading.Event()
        config = uvicorn.Config(app, host=host, port=port, log_level=log_level, lifespan="on")
        self.server = _Server(config, on_started=lambda _: self._started.set())
        self._thread = threading.Thread(target=self.server.run, name=f"lab-server-{port}", daemon=True)

    @property
    def port(self) -> int:
        """The port it listens on (known once started; kept after stop, for a restart on the same port)."""
        if self.server.port is None:
            raise InstrumentFault("the lab server has not started yet; call start() first")
        return self.server.port

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self, timeout_s: float = 20.0) -> "ServerThread":
        """Start serving; return once the server listens."""
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self._started.wait(0.01):
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise InstrumentFault(
                    f"the lab server did not start on {self.host}:{self.server.config.port} within {timeout_s} s "
                    "(port in use? see the log)"
                )
        return self

    def stop(self, timeout_s: float = 20.0) -> None:
        """Shut down gracefully (lifespan shutdown runs: the journal is closed)."""
        self.server.should_exit = True
        self._thread.join(timeout_s)

    def __enter__(self) -> "ServerThread":
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


TOKEN_ENV = "CLOSEDLOOP_LAB_TOKEN"
"""The environment variable ``closedloop lab serve`` reads its bearer token from (clients read the same one)."""


def is_loopback(host: str) -> bool:
    """Whether ``host`` is reachable from this machine only (``localhost``, ``127.0.0.0/8``, ``::1``)."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to any interface


def check_exposure(
    host: str,
    token: str | None,
    *,
    is_tls: bool = False,
    exposes: str = "run jobs on the lab",
    token_hint: str = f"set ${TOKEN_ENV} to a secret (clients pass the same one)",
) -> None:
    """Refuse to serve a non-loopback interface without a token; warn when a token would cross the network in clear.

    ``exposes`` says what anyone could do without a token and ``token_hint`` how to give one (``closedloop
    dashboard`` shares this check with its own wording).

    Raises:
        SetupError: ``host`` is not a loopback address and ``token`` is None.

    Example:
        >>> check_exposure("127.0.0.1", None)
        >>> check_exposure("0.0.0.0", None)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        vocabulary.domain.SetupError: --host 0.0.0.0 is reachable from other machines and no token is set, ...
    """
    if is_loopback(host):
        return
    if token is None:
        raise SetupError(
            f"--host {host} is reachable from other machines and no token is set, so anyone who can reach it could "
            f"{exposes}; {token_hint} or bind --host 127.0.0.1"
        )
    if not is_tls:
        log.warning(
            "serving %s over plain HTTP: the bearer token crosses the network unencrypted; pass --ssl-certfile and "
            "--ssl-keyfile, or put the server behind a TLS proxy", host,
        )


def serve(
    driver: InstrumentDriver,
    host: str = "127.0.0.1",
    port: int = 0,
    token: str | None = None,
    journal_path: str | Path | None = None,
    *,
    seconds_per_sim_hour: float = DEFAULT_SECONDS_PER_SIM_HOUR,
    log_level: str = "info",
    ssl_certfile: str | Path | None = None,
    ssl_keyfile: str | Path | None = None,
) -> None:
    """Serve ``driver`` over HTTP (HTTPS with a certificate and key) until interrupted (Ctrl-C or SIGTERM); blocks.

    Binds 127.0.0.1 by default; another interface needs a token (``check_exposure``). ``port=0`` takes a free port.
    Once listening it prints one line, ``closedloop lab: serving <driver> on http://HOST:PORT (OpenAPI at
    /openapi.json)``, so a caller that started it as a subprocess can read the URL.
    """
    if (ssl_certfile is None) != (ssl_keyfile is None):
        raise SetupError("TLS needs both --ssl-certfile and --ssl-keyfile (a PEM certificate and its private key)")
    is_tls = ssl_certfile is not None
    check_exposure(host, token, is_tls=is_tls)
    app = create_app(driver, token=token, journal_path=journal_path, seconds_per_sim_hour=seconds_per_sim_hour)
    scheme = "https" if is_tls else "http"

    def announce(server: _Server) -> None:
        print(
            f"closedloop lab: serving {driver.name} on {scheme}://{host}:{server.port} (OpenAPI at /openapi.json)",
            flush=True,
        )

    tls = {"ssl_certfile": str(ssl_certfile), "ssl_keyfile": str(ssl_keyfile)} if is_tls else {}
    config = uvicorn.Config(app, host=host, port=port, log_level=log_level, lifespan="on", **tls)
    _Server(config, on_started=announce).run()


def demo_oracle() -> FunctionOracle:
    """Ground truth for a SimLab served without data: a fixed pseudo-random value in [0, 100) per candidate id.

    Example:
        >>> from vocabulary.domain import Conditions
        >>> oracle = demo_oracle()
        >>> oracle(Conditions(values={}, id="c1")) == oracle(Conditions(values={"x": 2.0}, id="c1"))
        True
    """

    def value_of(candidate: Any) -> float:
        digest = hashlib.sha256(str(candidate.id).encode()).digest()
        return int.from_bytes(digest[:4], "big") % 10_000 / 100.0

    return FunctionOracle(value_of, property="value")


def build_driver(driver_name: str, driver_params: Mapping[str, Any] | None = None) -> InstrumentDriver:
    """Build a registered driver for serving.

    For ``"simlab"`` without an ``oracle`` parameter the ground truth comes from ``oracle_csv`` (a CSV file),
    ``oracle_column`` (its value column) and ``oracle_id_column`` (default ``"id"``), or else from
    ``demo_oracle()``. Other parameters go to the driver's constructor (``envelope`` and ``faults`` may be dicts).
    """
    from instruments.registry import load_driver

    params = dict(driver_params or {})
    if driver_name == "simlab" and "oracle" not in params:
        csv_path = params.pop("oracle_csv", None)
        column = params.pop("oracle_column", None)
        id_column = params.pop("oracle_id_column", "id")
        if csv_path is not None:
            if column is None:
                raise SetupError("oracle_csv needs oracle_column, the column holding the measured values")
            params["oracle"] = TableOracle.from_csv(csv_path, column, id_column=id_column)
        elif column is not None:
            raise SetupError("oracle_column needs oracle_csv, the CSV file that holds the column")
        else:
            params["oracle"] = demo_oracle()
    return load_driver(driver_name, **params)


def run_server(
    driver_name: str = "simlab",
    host: str = "127.0.0.1",
    port: int = 8000,
    token: str | None = None,
    journal: str | Path | None = None,
    driver_params: Mapping[str, Any] | None = None,
    *,
    seconds_per_sim_hour: float = DEFAULT_SECONDS_PER_SIM_HOUR,
    log_level: str = "info",
) -> None:
    """Entry point for ``closedloop lab serve``: build the driver registered as ``driver_name`` and serve it.

    Raises:
        SetupError: the driver is unknown or its parameters are wrong.
    """
    driver = build_driver(driver_name, driver_params)
    serve(
        driver, host=host, port=port, token=token, journal_path=journal,
        seconds_per_sim_hour=seconds_per_sim_hour, log_level=log_level,
    )
