"""``MadsciDriver``: run closedloop jobs as actions on a MADSci REST node, through the node's REST API.

A MADSci node (``madsci.node_module.RestNode``) serves its actions over HTTP. For each job the driver creates an
action (``POST /action/{name}`` with its arguments) once the node says it is ready (``GET /status``), starts it
(``POST /action/{name}/{action_id}/start``), follows ``GET /action/{action_id}/status`` until it ends and reads
``GET /action/{action_id}/result``. ``health`` reads ``GET /status`` and ``capabilities`` ``GET /info``. Jobs run
one at a time, in priority then submission order, as a MADSci workcell sends them to one device.

Which arguments: the node's ``/info`` declares each action's arguments. A job's settings (a conditions candidate's
values and the job's parameters) whose names are arguments are sent; an argument named ``job_key`` gets the job key,
``candidate_id`` the candidate's id and ``job`` the whole ``LabJob`` as JSON. A required argument the job cannot fill
is a ``SetupError`` at submit. The action's ``json_result`` is the value: a number, or a mapping holding it under
``result_key`` (and its standard deviation under ``"uncertainty"``).

The driver speaks the REST API with httpx rather than importing ``madsci.client``: the client is synchronous, takes
seconds to import (it brings pymongo, minio, textual and more), and its models cannot be serialised with the pydantic
this project runs (see ``instruments/DECISIONS.md``). ``closedloop[madsci]`` installs MADSci's node module, for
serving a node and for the tests.

Example:
    >>> MadsciDriver("http://127.0.0.1:2000", action="measure")
    MadsciDriver('http://127.0.0.1:2000', action='measure')
"""

from __future__ import annotations

import asyncio
import math
from typing import Any

import httpx

from instruments.base import LabJob
from instruments.envelope import RESERVED_PARAMETERS, SafetyEnvelope
from instruments.kit import BaseDriver, BookEntry
from vocabulary.domain import InstrumentFault, SetupError, redact_url, redact_urls_in

__all__ = ["MadsciDriver"]

_RETRY_STATUS = frozenset({429, 500, 502, 503, 504})
_JOB_ARGS = frozenset({"job_key", "candidate_id", "job"})


class MadsciDriver(BaseDriver):
    """``InstrumentDriver`` for one action of a MADSci REST node.

    Args:
        node_url: the node's base URL, e.g. ``http://127.0.0.1:2000``.
        action: the node action that makes and measures one candidate.
        result_key: where the value sits when the action's ``json_result`` is a mapping.
        envelope: the lab's ``SafetyEnvelope`` (or its dict); MADSci nodes declare none, so the default refuses
            nothing.
        timeout_s: timeout of one quick request (status, info, create), s.
        action_timeout_s: how long starting an action may take, which on a REST node is the action's run time, s.
        ready_timeout_s: how long a job waits for a busy, paused or locked node before it fails, s.
        retries: extra attempts of a read (GET) after a connection error, 429 or 5xx, and of an action the node
            answered ``not_ready`` (nothing ran).
        poll_s: how often to ask the node whether it is ready, or whether a started action has finished, s.
    """

    name = "madsci"
    version = "0.1.0"

    def __init__(
        self, node_url: str, action: str = "run_experiment", *, result_key: str = "value",
        envelope: SafetyEnvelope | dict[str, Any] | None = None, timeout_s: float = 10.0,
        action_timeout_s: float = 24 * 3600.0, ready_timeout_s: float = 600.0, retries: int = 3,
        poll_s: float = 0.05,
    ) -> None:
        if not str(node_url).startswith(("http://", "https://")):
            raise SetupError(f"node url {redact_urls_in(str(node_url))!r} must start with http:// or https://, "
                             "e.g. http://127.0.0.1:2000")
        if not timeout_s > 0 or not action_timeout_s > 0 or ready_timeout_s < 0 or retries < 0 or not poll_s > 0:
            raise SetupError(f"MadsciDriver needs {timeout_s=} > 0, {action_timeout_s=} > 0, {ready_timeout_s=} >= 0, "
                             f"{poll_s=} > 0 and {retries=} >= 0")
        self.node_url = str(node_url).rstrip("/")
        self.display_url = redact_url(self.node_url)
        self.action, self.result_key = action, result_key
        self.timeout_s, self.action_timeout_s, self.retries = float(timeout_s), float(action_timeout_s), int(retries)
        self.poll_s, self.ready_timeout_s = float(poll_s), float(ready_timeout_s)
        super().__init__(envelope=envelope or {"name": "madsci node"})
        self._action_args: dict[str, dict[str, Any]] | None = None
        self._client: httpx.AsyncClient | None = None
        self._client_loop: asyncio.AbstractEventLoop | None = None

    # ------------------------------------------------------------------------------------------- the kit's hooks
    async def describe(self) -> dict[str, Any]:
        """The node's name, id, module and actions (``GET /info``), and the action this driver sends."""
        info = await self._get("/info")
        return {
            "node_url": self.display_url, "action": self.action,
            "node_name": info.get("node_name"), "node_id": info.get("node_id"),
            "module_name": info.get("module_name"), "module_version": info.get("module_version"),
            "actions": sorted(info.get("actions") or {}),
        }

    async def validate(self, job: LabJob) -> None:
        """Refuse a job that cannot fill the action's required arguments, or an action the node lacks
        (``SetupError``); ``InstrumentFault`` when the node cannot be reached."""
        self.action_args(job, await self._declared_args())

    async def poll(self, entry: BookEntry) -> None:
        """Fail a running job whose action the node has lost (``not_ready`` or ``unknown``)."""
        if entry.state == "running" and entry.remote is not None:
            node_status = await self._get(f"/action/{entry.remote}/status")
            if node_status in ("not_ready", "unknown"):
                self.finish(entry, reason=f"the MADSci node reports action {entry.remote} as {node_status}")

    async def stop(self, entry: BookEntry) -> None:
        """Cancel a running action with the node's ``cancel`` admin command (a queued job never reached the node).

        Raises:
            InstrumentFault: the node cannot cancel it (it does not implement ``cancel``); the job runs on.
        """
        if entry.state != "running":
            return
        answer = await self._send("POST", "/admin/cancel", timeout_s=self.timeout_s)
        if not answer.get("success"):
            problems = "; ".join(e.get("message", "") for e in answer.get("errors") or []) or "no reason given"
            raise InstrumentFault(f"the MADSci node at {self.display_url} could not cancel job "
                                  f"{entry.job.job_key!r}: {problems}")

    async def diagnose(self) -> dict[str, Any]:
        """The node's status (``GET /status``); ``is_ok`` when it is ready, or False with the reason."""
        base = {"node_url": self.display_url}
        try:
            status = await self._get("/status", retries=0)
        except InstrumentFault as exc:
            return {**base, "is_ok": False, "reason": str(exc)}
        is_ok = bool(status.get("ready")) and not status.get("errored")
        return {**base, "is_ok": is_ok, "node_status": status.get("description"), "is_busy": status.get("busy")}

    async def aclose(self) -> None:
        """Stop the worker and close the connection pool of the current loop."""
        await super().aclose()
        if self._client is not None and self._client_loop is asyncio.get_running_loop():
            await self._client.aclose()
        self._client = self._client_loop = None

    # ------------------------------------------------------------------------------------------- the action
    def action_args(self, job: LabJob, declared: dict[str, dict[str, Any]]) -> dict[str, Any]:
        """The arguments ``job`` sends: its settings named like the action's declared arguments, plus job fields.

        Raises:
            SetupError: a required argument is neither a setting of the job nor a job field.
        """
        settings: dict[str, Any] = dict(getattr(job.candidate, "values", None) or {})
        settings.update({k: v for k, v in job.parameters.items() if k not in RESERVED_PARAMETERS})
        fields = {"job_key": job.job_key, "candidate_id": job.candidate.id, "job": job.model_dump(mode="json")}
        args = {name: settings[name] for name in declared if name in settings}
        args.update({name: fields[name] for name in declared if name in _JOB_ARGS and name not in args})
        missing = sorted(name for name, spec in declared.items() if spec.get("required") and name not in args)
        if missing:
            raise SetupError(
                f"job {job.job_key!r} cannot fill the required argument(s) {missing} of action {self.action!r} on "
                f"the MADSci node at {self.display_url}; set them as candidate values or job parameters"
            )
        return args

    async def _declared_args(self) -> dict[str, dict[str, Any]]:
        if self._action_args is None:
            actions = (await self._get("/info")).get("actions") or {}
            if self.action not in actions:
                raise SetupError(f"the MADSci node at {self.display_url} has no action {self.action!r}; "
                                 f"its actions are {sorted(actions)}")
            self._action_args = dict(actions[self.action].get("args") or {})
        return self._action_args

    async def run(self, entry: BookEntry) -> None:
        """One action: wait for the node to be ready, create and start it, follow it to its end."""
        args = self.action_args(entry.job, await self._declared_args())
        for _ in range(self.retries + 1):
            busy = await self._await_ready()
            if busy:
                self.finish(entry, reason=f"node not ready: {busy} after {self.ready_timeout_s:g} s; check the node")
                return
            created = await self._send("POST", f"/action/{self.action}", json={"args": args}, timeout_s=self.timeout_s)
            entry.remote = created["action_id"]
            answer = await self._send("POST", f"/action/{self.action}/{entry.remote}/start",
                                      timeout_s=self.action_timeout_s)
            if answer.get("status") != "not_ready":  # not_ready: another client took the node first; nothing ran
                break
        while answer.get("status") in ("not_started", "running", "paused") and not entry.is_cancel_requested:
            await asyncio.sleep(self.poll_s)
            if await self._get(f"/action/{entry.remote}/status") not in ("not_started", "running", "paused"):
                answer = await self._get(f"/action/{entry.remote}/result")
        if entry.is_cancel_requested:
            return
        log = [(self.action, entry.started_s, max(self.book.now(), entry.started_s))]
        status = answer.get("status")
        if status == "succeeded":
            value, uncertainty, problem = self._value(answer.get("json_result"))
            if problem:
                self.finish(entry, reason=problem, station_log=log)
            else:
                self.finish(entry, value=value, uncertainty=uncertainty, station_log=log)
        elif status == "cancelled":
            self.mark_cancelled(entry)
        else:
            problems = "; ".join(e.get("message", "") for e in answer.get("errors") or []) or "no reason given"
            self.finish(entry, reason=f"action {status}: {problems}", station_log=log)

    async def _await_ready(self) -> str:
        """Wait (at most ``ready_timeout_s``) until the node says it is ready; '' when it is, else why it is not."""
        deadline = asyncio.get_running_loop().time() + self.ready_timeout_s
        while True:
            status = await self._get("/status")
            if status.get("ready"):
                return ""
            if asyncio.get_running_loop().time() > deadline:
                return str(status.get("description") or "not ready")
            await asyncio.sleep(self.poll_s)

    def _value(self, json_result: Any) -> tuple[float | None, float | None, str]:
        uncertainty = None
        raw = json_result
        if isinstance(json_result, dict):
            raw, uncertainty = json_result.get(self.result_key), json_result.get("uncertainty")
        if isinstance(raw, bool) or not isinstance(raw, (int, float)) or not math.isfinite(raw):
            return None, None, (f"bad reading: action {self.action!r} returned {json_result!r}, with no finite number "
                                f"{'under ' + repr(self.result_key) if isinstance(json_result, dict) else ''}".rstrip())
        if not isinstance(uncertainty, (int, float)) or isinstance(uncertainty, bool) or uncertainty < 0:
            uncertainty = None
        return float(raw), uncertainty, ""

    # ------------------------------------------------------------------------------------------- transport
    def _async_client(self) -> httpx.AsyncClient:
        loop = asyncio.get_running_loop()
        if self._client is None or self._client_loop is not loop:
            self._client = httpx.AsyncClient(base_url=self.node_url, timeout=httpx.Timeout(self.timeout_s))
            self._client_loop = loop
        return self._client

    async def _get(self, path: str, retries: int | None = None) -> Any:
        problem = ""
        for attempt in range((self.retries if retries is None else retries) + 1):
            if attempt:
                await asyncio.sleep(min(0.2 * 2 ** (attempt - 1), 5.0))
            try:
                response = await self._async_client().get(path)
            except httpx.TransportError as exc:
                problem = redact_urls_in(f"{type(exc).__name__}: {exc}") or type(exc).__name__
                continue
            if response.status_code in _RETRY_STATUS:
                problem = f"HTTP {response.status_code}"
                continue
            return self._decode(response, "GET", path)
        raise InstrumentFault(f"the MADSci node at {self.display_url} did not answer GET {path} ({problem}); "
                              "check that it is running")

    async def _send(self, method: str, path: str, *, json: Any = None, timeout_s: float) -> Any:
        """One attempt only: creating or starting an action twice is not the same as once."""
        try:
            response = await self._async_client().request(method, path, json=json, timeout=timeout_s)
        except httpx.TransportError as exc:
            raise InstrumentFault(f"the MADSci node at {self.display_url} did not answer {method} {path}: "
                                  f"{redact_urls_in(str(exc)) or type(exc).__name__}") from exc
        return self._decode(response, method, path)

    def _decode(self, response: httpx.Response, method: str, path: str) -> Any:
        if response.is_success:
            return response.json()
        detail = response.text[:300]
        if response.status_code == 422:
            raise SetupError(f"the MADSci node at {self.display_url} refused {method} {path} as malformed: {detail}")
        raise InstrumentFault(f"the MADSci node at {self.display_url} answered {method} {path} with HTTP "
                              f"{response.status_code}: {detail}")

    def __repr__(self) -> str:
        return f"MadsciDriver({self.display_url!r}, action={self.action!r})"

