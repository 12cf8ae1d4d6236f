"""``HttpDriver``: talk to a lab served over HTTP (``closedloop lab serve`` or any server with the same API).

Every verb is safe to repeat (submit is idempotent on the job key), so the driver retries freely: on connection
errors, timeouts and 5xx answers it waits ``backoff_s``, then twice that, and so on (at most ``max_backoff_s``),
for up to ``retries`` more attempts. A lab server restarting in the middle of a campaign is ridden out, and a
submit whose answer was lost is simply sent again. Refusals map to the project's errors with the server's message:

- 422 ``envelope_violation`` -> ``EnvelopeViolation`` (with every violation);
- 401, 409 ``key_conflict``, 400 and malformed requests -> ``SetupError``;
- 404, 409 ``not_finished`` and a lab still unreachable after the retries -> ``InstrumentFault``.

The driver keeps one ``httpx.AsyncClient`` per event loop, so it works under ``asyncio.run`` called many times and
inside a long-lived loop thread alike.

Example:
    >>> from instruments.server import ServerThread, create_app
    >>> from instruments.simlab import SimLabDriver
    >>> from vocabulary.domain import Conditions
    >>> import asyncio
    >>> async def one_job(url):
    ...     lab = HttpDriver(url, token="s3cret")
    ...     handle = await lab.submit(LabJob(job_key="remote-1", candidate=Conditions(values={"x": 1.0}, id="c1")))
    ...     while await lab.status(handle) not in ("done", "failed"):
    ...         await asyncio.sleep(0.02)
    ...     return (await lab.result(handle)).value
    >>> with ServerThread(create_app(SimLabDriver(oracle=lambda c: 7.0), token="s3cret")) as server:
    ...     asyncio.run(one_job(server.url))
    7.0
"""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import quote

import httpx
from tenacity import (
    AsyncRetrying,
    Retrying,
    retry_if_exception_type,
    stop_after_attempt,
    wait_exponential,
)

from instruments.base import JobHandle, JobState, LabJob, LabResult
from instruments.envelope import EnvelopeViolation, SafetyEnvelope
from vocabulary.domain import InstrumentFault, SetupError, redact_url, redact_urls_in

__all__ = ["HttpDriver"]

_RETRY_STATUS = frozenset({500, 502, 503, 504})


class HttpDriver:
    """``InstrumentDriver`` for a remote lab server.

    Args:
        base_url: the server, e.g. ``http://127.0.0.1:8000``.
        token: bearer token the server was started with; None when it needs none.
        timeout_s: timeout of one HTTP request (connect, read, write, pool), s.
        retries: extra attempts after a connection error, a timeout or a 5xx answer.
        backoff_s: wait before the first retry, s; doubled on each further retry.
        max_backoff_s: longest wait between two attempts, s.
    """

    name = "http"
    version = "0.1.0"

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        timeout_s: float = 10.0,
        retries: int = 5,
        backoff_s: float = 0.2,
        max_backoff_s: float = 5.0,
    ) -> None:
        if not str(base_url).startswith(("http://", "https://")):
            raise SetupError(f"lab url {redact_urls_in(str(base_url))!r} must start with http:// or https://, e.g. http://127.0.0.1:8000")
        if retries < 0 or backoff_s < 0 or not timeout_s > 0:
            raise SetupError(f"HttpDriver needs {retries=} >= 0, {backoff_s=} >= 0 and {timeout_s=} > 0")
        self.base_url = str(base_url).rstrip("/")
        self.display_url = redact_url(self.base_url)  # what messages, health and capabilities show
        self.token = token
        self.timeout_s = float(timeout_s)
        self.retries = int(retries)
        self.backoff_s = float(backoff_s)
        self.max_backoff_s = float(max_backoff_s)
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._envelope: SafetyEnvelope | None = None
        self._now_s = 0.0
        self.n_retries = 0  # attempts repeated after a connection error, a timeout or a 5xx, since construction
        self._client: httpx.AsyncClient | None = None
        self._client_loop: asyncio.AbstractEventLoop | None = None

    # ------------------------------------------------------------------------------------------- protocol
    async def capabilities(self) -> dict[str, Any]:
        """The server's capabilities, plus ``remote_url``."""
        return {**(await self._json("GET", "/capabilities")), "remote_url": self.display_url}

    async def submit(self, job: LabJob) -> JobHandle:
        """Submit ``job``; a repeat (also after a lost answer or a server restart) returns the same handle.

        Raises:
            EnvelopeViolation: the server refused the job as outside its envelope; nothing runs.
            SetupError: the key was used for a different job, or the job is malformed for this lab.
            InstrumentFault: the lab could not be reached after the retries.
        """
        await self._json("POST", "/jobs", json=job.model_dump(mode="json"), job_key=job.job_key)
        return JobHandle(job_key=job.job_key, driver=self.name)

    async def status(self, handle: JobHandle) -> JobState:
        """The job's state on the server."""
        return (await self._json("GET", self._job_path(handle)))["state"]

    async def result(self, handle: JobHandle) -> LabResult:
        """The ``LabResult`` of a finished job; ``InstrumentFault`` when it is unfinished, cancelled or unknown."""
        return LabResult.model_validate(await self._json("GET", self._job_path(handle) + "/result"))

    async def cancel(self, handle: JobHandle) -> None:
        """Cancel a queued or running job; a finished job keeps its result."""
        await self._json("POST", self._job_path(handle) + "/cancel")

    async def health(self) -> dict[str, Any]:
        """The server's health; ``{"is_ok": False, "reason": ...}`` when it cannot be reached (no long retrying)."""
        try:
            return await self._json("GET", "/health", retries=1)
        except (SetupError, EnvelopeViolation):
            raise
        except InstrumentFault as exc:
            return {"is_ok": False, "driver": self.name, "remote_url": self.display_url, "reason": str(exc)}

    # ------------------------------------------------------------------------------------------- envelope, clock
    @property
    def envelope(self) -> SafetyEnvelope:
        """The server's safety envelope, fetched (synchronously, with retries) on first use and then cached.

        Inside a running event loop prefer ``await fetch_envelope()``, which does not block the loop.
        """
        if self._envelope is None:
            self._envelope = SafetyEnvelope.model_validate(self._json_sync("GET", "/envelope"))
        return self._envelope

    async def fetch_envelope(self) -> SafetyEnvelope:
        """Fetch the server's safety envelope (again) and cache it."""
        self._envelope = SafetyEnvelope.model_validate(await self._json("GET", "/envelope"))
        return self._envelope

    @property
    def now(self) -> float:
        """The lab clock (s) as of the last answer that carried it; 0.0 before any."""
        return self._now_s

    async def aclose(self) -> None:
        """Close the connection pool of the current event loop."""
        if self._client is not None:
            await self._client.aclose()
            self._client = self._client_loop = None

    async def __aenter__(self) -> HttpDriver:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    # ------------------------------------------------------------------------------------------- transport
    def _job_path(self, handle: JobHandle) -> str:
        if handle.driver != self.name:
            raise InstrumentFault(
                f"handle for job {handle.job_key!r} belongs to driver {handle.driver!r}, not {self.name!r}"
            )
        return "/jobs/" + quote(handle.job_key, safe="")

    def _async_client(self) -> httpx.AsyncClient:
        loop = asyncio.get_running_loop()
        if self._client is None or self._client_loop is not loop:
            # A client's connections belong to the loop that opened them; a new loop needs a new client.
            self._client = httpx.AsyncClient(
                base_url=self.base_url, headers=self._headers, timeout=httpx.Timeout(self.timeout_s)
            )
            self._client_loop = loop
        return self._client

    def _retrying(self, n_attempts: int) -> dict[str, Any]:
        """The one retry policy of both clients (tenacity): ``n_attempts`` in all, waits of ``backoff_s``, twice
        that, ... at most ``max_backoff_s`` between them, and only after a connection error, a timeout or a 5xx."""
        return {"stop": stop_after_attempt(n_attempts), "reraise": True,
                "wait": wait_exponential(multiplier=self.backoff_s, max=self.max_backoff_s),
                "retry": retry_if_exception_type(_Retryable), "before_sleep": self._count_retry}

    def _count_retry(self, _state: Any) -> None:
        self.n_retries += 1

    async def _json(
        self, method: str, path: str, *, json: Any = None, retries: int | None = None, job_key: str | None = None
    ) -> Any:
        n_attempts = (self.retries if retries is None else retries) + 1
        try:
            async for attempt in AsyncRetrying(**self._retrying(n_attempts)):
                with attempt:
                    response = _retryable(await _request(self._async_client(), method, path, json=json))
        except _Retryable as exc:
            raise self._unreachable(method, path, n_attempts, str(exc)) from None
        return self._decode(response, method, path, job_key)

    def _json_sync(self, method: str, path: str) -> Any:
        n_attempts = self.retries + 1
        with httpx.Client(base_url=self.base_url, headers=self._headers, timeout=self.timeout_s) as client:
            try:
                for attempt in Retrying(**self._retrying(n_attempts)):
                    with attempt:
                        response = _retryable(_request_sync(client, method, path))
            except _Retryable as exc:
                raise self._unreachable(method, path, n_attempts, str(exc)) from None
            return self._decode(response, method, path, None)

    def _unreachable(self, method: str, path: str, n_attempts: int, problem: str) -> InstrumentFault:
        return InstrumentFault(
            f"the lab at {self.display_url} did not answer {method} {path} after {n_attempts} attempts ({problem}); "
            "check that it is running (closedloop lab serve) or raise retries="
        )

    def _decode(self, response: httpx.Response, method: str, path: str, job_key: str | None) -> Any:
        if response.is_success:
            body = response.json()
            if isinstance(body, dict) and isinstance(body.get("now_s"), (int, float)):
                self._now_s = float(body["now_s"])
            return body
        body = _body(response)
        kind, message = body.get("error"), _message(response)
        if kind == "envelope_violation":
            raise EnvelopeViolation(message, body.get("violations") or (), job_key)
        if response.status_code == 401:
            raise SetupError(f"the lab at {self.display_url} refused {method} {path} (401): {message}")
        if kind in ("key_conflict", "setup_error") or response.status_code == 400:
            raise SetupError(message)
        if response.status_code == 422:
            raise SetupError(f"the lab at {self.display_url} refused {method} {path} as malformed: {message}")
        raise InstrumentFault(message)

    def __repr__(self) -> str:
        return f"HttpDriver({self.display_url!r}, retries={self.retries}, timeout_s={self.timeout_s})"


def _body(response: httpx.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def _message(response: httpx.Response) -> str:
    body = _body(response)
    if isinstance(body.get("message"), str):
        return body["message"]
    if "detail" in body:
        return str(body["detail"])[:500]
    return response.text[:500] or response.reason_phrase


class _Retryable(Exception):
    """A connection error, a timeout or a 5xx answer: worth another attempt (the message says which)."""


def _retryable(response: httpx.Response) -> httpx.Response:
    if response.status_code in _RETRY_STATUS:
        raise _Retryable(f"HTTP {response.status_code}: {_message(response)}")
    return response


async def _request(client: httpx.AsyncClient, method: str, path: str, **kwargs: Any) -> httpx.Response:
    try:
        return await client.request(method, path, **kwargs)
    except httpx.TransportError as exc:
        raise _Retryable(_transport_problem(exc)) from exc


def _request_sync(client: httpx.Client, method: str, path: str) -> httpx.Response:
    try:
        return client.request(method, path)
    except httpx.TransportError as exc:
        raise _Retryable(_transport_problem(exc)) from exc


def _transport_problem(exc: httpx.TransportError) -> str:
    return redact_urls_in(f"{type(exc).__name__}: {exc}") if str(exc) else type(exc).__name__
