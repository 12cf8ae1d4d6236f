"""``Sila2Driver``: run closedloop jobs on a SiLA 2 server through the ``ClosedLoopExperiment`` feature.

``submit`` starts the observable command ``RunExperiment`` with the job (its key and its ``LabJob`` JSON) and keeps
the command instance. ``status`` is the instance's SiLA execution status (``waiting`` -> ``queued``, ``running``,
``finishedSuccessfully`` -> ``done``, ``finishedWithError`` -> ``failed`` with the server's message), which the
``sila2`` client keeps up to date from the server's execution-info stream. ``cancel`` calls ``CancelExperiment``,
``health`` reads the property ``InstrumentStatus`` and ``envelope`` the property ``SafetyEnvelope``. The feature
definition is ``ClosedLoopExperiment.sila.xml`` beside this module; ``instruments.adapters.sila2_server`` serves it.

The ``sila2`` client is synchronous (gRPC); every call that waits on the network runs in a worker thread, so the
driver never blocks the event loop it is awaited on.

Example:
    >>> import asyncio
    >>> from instruments.adapters.sila2_server import serve_sila_lab
    >>> from instruments.base import LabJob
    >>> from vocabulary.domain import Conditions
    >>> server = serve_sila_lab(lambda job: 3.0 * job.candidate.values["x"], experiment_s=0.05)
    >>> async def one_job(port):
    ...     lab = Sila2Driver("127.0.0.1", port, insecure=True)
    ...     handle = await lab.submit(LabJob(job_key="s1", candidate=Conditions(values={"x": 2.0}, id="c1")))
    ...     while await lab.status(handle) not in ("done", "failed"):
    ...         await asyncio.sleep(0.02)
    ...     value = (await lab.result(handle)).value
    ...     await lab.aclose()
    ...     return value
    >>> asyncio.run(one_job(server.sila_port))
    6.0
    >>> server.stop()
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

from instruments.envelope import SafetyEnvelope
from instruments.kit import BaseDriver, BookEntry
from vocabulary.domain import InstrumentFault, SetupError, import_optional

__all__ = ["FEATURE", "Sila2Driver"]

#: The SiLA 2 feature the driver calls.
FEATURE = "ClosedLoopExperiment"


def _sila(module: str) -> Any:
    return import_optional(module, "sila2", "the SiLA 2 driver")


class Sila2Driver(BaseDriver):
    """``InstrumentDriver`` for a SiLA 2 server that implements ``ClosedLoopExperiment``.

    Args:
        host: the server's address, e.g. ``"127.0.0.1"``.
        port: the server's gRPC port.
        insecure: talk without TLS. SiLA 2 requires encryption; use this for a server on loopback in tests only.
        root_certs: path of the PEM certificate authority that signed the server's certificate (TLS); None uses
            the system's roots.
        envelope: a ``SafetyEnvelope`` (or its dict) to use instead of the one the server reports.
        timeout_s: how long a SiLA call may take before the lab counts as unreachable, s.
    """

    name = "sila2"
    version = "0.1.0"

    def __init__(
        self, host: str = "127.0.0.1", port: int = 50052, *, insecure: bool = False, root_certs: str | None = None,
        envelope: SafetyEnvelope | dict[str, Any] | None = None, timeout_s: float = 10.0,
    ) -> None:
        if not isinstance(port, int) or not 0 < port < 65536:
            raise SetupError(f"{port=} is not a TCP port; give the SiLA server's port (1..65535)")
        if not timeout_s > 0:
            raise SetupError(f"{timeout_s=} must be > 0")
        self.host, self.port, self.is_insecure, self.timeout_s = host, port, bool(insecure), float(timeout_s)
        self.root_certs = root_certs
        self._envelope = envelope if isinstance(envelope, SafetyEnvelope) or envelope is None else (
            SafetyEnvelope.model_validate(envelope))
        self._is_envelope_pinned = envelope is not None
        self._client: Any = None
        self._connect_lock = threading.Lock()
        super().__init__()

    # ------------------------------------------------------------------------------------------- the kit's hooks
    async def describe(self) -> dict[str, Any]:
        """The server's name, type, version and features, and the feature this driver calls."""
        def read() -> dict[str, Any]:
            service = self._feature_client().SiLAService
            return {
                "server_name": service.ServerName.get(),
                "server_type": service.ServerType.get(),
                "server_version": service.ServerVersion.get(),
                "server_uuid": service.ServerUUID.get(),
                "implemented_features": sorted(service.ImplementedFeatures.get()),
            }

        return {"address": f"{self.host}:{self.port}", "feature": FEATURE,
                **(await self._call(read, "read the server's SiLAService"))}

    async def start(self, entry: BookEntry) -> None:
        """Start ``RunExperiment`` for the job; ``InstrumentFault`` when the server cannot be reached."""
        job = entry.job
        entry.remote = await self._call(
            lambda: self._experiment().RunExperiment(JobKey=job.job_key, Job=job.model_dump_json()),
            f"start RunExperiment for job {job.job_key!r}",
        )

    async def poll(self, entry: BookEntry) -> None:
        """Map the command instance's SiLA execution status onto the job's state (and collect a finished one)."""
        execution_status = _sila("sila2.framework").CommandExecutionStatus
        instance = entry.remote
        status = instance.status
        if status == execution_status.running:
            self.mark_running(entry)
        elif status not in (None, execution_status.waiting):
            await self._collect(entry, instance)

    async def stop(self, entry: BookEntry) -> None:
        """``CancelExperiment`` for a waiting or running job."""
        key = entry.job.job_key
        await self._call(lambda: self._experiment().CancelExperiment(JobKey=key), f"cancel job {key!r}")

    async def diagnose(self) -> dict[str, Any]:
        """``InstrumentStatus`` of the server; ``is_ok`` unless it says ``Down`` or cannot be reached."""
        base = {"address": f"{self.host}:{self.port}"}
        try:
            status = await self._call(lambda: self._experiment().InstrumentStatus.get(), "read InstrumentStatus")
        except InstrumentFault as exc:
            return {**base, "is_ok": False, "reason": str(exc)}
        return {**base, "is_ok": not str(status).startswith("Down"), "instrument_status": status}

    @property
    def envelope(self) -> SafetyEnvelope:
        """The server's ``SafetyEnvelope`` property, read on first use (blocking) and cached; or the pinned one."""
        if self._envelope is None:
            self._envelope = self._read_envelope()
        return self._envelope

    async def fetch_envelope(self) -> SafetyEnvelope:
        """Read the server's envelope without blocking the loop (the pinned one when ``envelope=`` was given)."""
        if self._envelope is None or not self._is_envelope_pinned:
            self._envelope = await self._call(self._read_envelope, "read SafetyEnvelope")
        return self._envelope

    async def aclose(self) -> None:
        """Close the gRPC channel; the next call reconnects."""
        await super().aclose()
        client, self._client = self._client, None
        if client is not None:
            await asyncio.to_thread(client.close)

    # ------------------------------------------------------------------------------------------- transport
    def _feature_client(self) -> Any:
        with self._connect_lock:
            if self._client is None:
                client_module = _sila("sila2.client")
                certs = Path(self.root_certs).read_bytes() if self.root_certs else None
                client = client_module.SilaClient(self.host, self.port, insecure=self.is_insecure, root_certs=certs)
                if not hasattr(client, FEATURE):
                    client.close()
                    raise SetupError(f"the SiLA server at {self.host}:{self.port} does not implement {FEATURE}; "
                                     "serve instruments/adapters/ClosedLoopExperiment.sila.xml on it")
                self._client = client
            return self._client

    def _experiment(self) -> Any:
        return getattr(self._feature_client(), FEATURE)

    def _read_envelope(self) -> SafetyEnvelope:
        return SafetyEnvelope.model_validate_json(self._experiment().SafetyEnvelope.get())

    async def _call(self, fn: Any, what: str) -> Any:
        try:
            return await asyncio.wait_for(asyncio.to_thread(fn), self.timeout_s)
        except (SetupError, InstrumentFault):
            raise
        except TimeoutError as exc:
            raise InstrumentFault(f"the SiLA server at {self.host}:{self.port} did not answer in {self.timeout_s} s "
                                  f"when asked to {what}; check that it is running") from exc
        except Exception as exc:  # gRPC and SiLA errors come in many classes; all mean the call failed
            raise InstrumentFault(f"the SiLA server at {self.host}:{self.port} failed to {what}: "
                                  f"{type(exc).__name__}: {exc}") from exc

    async def _collect(self, entry: BookEntry, instance: Any) -> None:
        errors_module = _sila("sila2.framework.errors.defined_execution_error")
        try:
            responses = await asyncio.wait_for(asyncio.to_thread(instance.get_responses), self.timeout_s)
        except errors_module.DefinedExecutionError as exc:
            if exc.identifier == "ExperimentCancelled":
                self.mark_cancelled(entry)
            else:
                self.finish(entry, reason=f"measurement failed: {exc.message}", station_log=self._log(entry))
            return
        except Exception as exc:  # noqa: BLE001 - an undefined execution error or a lost connection fails the job
            self.finish(entry, reason=f"experiment failed on the SiLA server: {type(exc).__name__}: {exc}",
                        station_log=self._log(entry))
            return
        uncertainty = responses.Uncertainty if responses.Uncertainty >= 0 else None
        self.finish(entry, value=responses.Value, uncertainty=uncertainty, station_log=self._log(entry))

    def _log(self, entry: BookEntry) -> list[tuple[str, float, float]]:
        start = entry.started_s if entry.started_s is not None else entry.submitted_s
        return [(FEATURE, start, max(self.book.now(), start))]

    def __repr__(self) -> str:
        return f"Sila2Driver({self.host!r}, {self.port}, insecure={self.is_insecure})"
