"""A SiLA 2 server for the ``ClosedLoopExperiment`` feature, built from ``ClosedLoopExperiment.sila.xml``.

The feature definition beside this module is what ``Sila2Driver`` calls: the observable command ``RunExperiment``
(one lab job in, the measured value out), ``CancelExperiment``, and the properties ``InstrumentStatus`` and
``SafetyEnvelope``. This module is the reference implementation: the ``sila2`` package turns the XML into the gRPC
service at start-up (no generated code to keep in sync), and ``experiment_implementation`` answers each call by name,
the way ``sila2-codegen``'s base classes would. A lab wraps its own instrument by passing ``measure``; the tests pass
the project's ground truth.

Experiments run one at a time in arrival order: an execution is ``waiting`` until the instrument is free, then
``running`` for ``experiment_s`` seconds (wall clock), then finished. A repeated ``RunExperiment`` with a known job
key does not run again; it waits for and returns the first run's answer, so a restarted client cannot run a job twice.

Example:
    >>> server = serve_sila_lab(lambda job: (2.5, 0.1), experiment_s=0.0)
    >>> server.sila_port > 0
    True
    >>> server.stop()
"""

from __future__ import annotations

import math
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from instruments.base import LabJob
from instruments.envelope import SafetyEnvelope
from vocabulary.domain import InstrumentFault, SetupError, import_optional

__all__ = ["FEATURE_XML", "experiment_implementation", "serve_sila_lab"]

#: The feature definition both the server and ``Sila2Driver`` use.
FEATURE_XML = Path(__file__).with_name("ClosedLoopExperiment.sila.xml")

Measure = Callable[[LabJob], "float | tuple[float, float | None]"]


def _sila(module: str) -> Any:
    return import_optional(module, "sila2", "the SiLA 2 lab server")


def load_feature() -> Any:
    """The ``sila2.framework.Feature`` parsed (and schema-checked) from ``FEATURE_XML``."""
    return _sila("sila2.framework").Feature(str(FEATURE_XML))


class _Run:
    """One job key's experiment: finished once, answered to every RunExperiment that names the key."""

    def __init__(self) -> None:
        self.finished = threading.Event()
        self.is_cancelled = False
        self.value: float | None = None
        self.uncertainty: float | None = None
        self.error: str | None = None


def experiment_implementation(
    parent_server: Any, feature: Any, measure: Measure, *, experiment_s: float = 0.2,
    envelope: SafetyEnvelope | None = None,
) -> Any:
    """The ``ClosedLoopExperiment`` implementation for ``parent_server`` (a ``sila2.server.SilaServer``).

    Args:
        parent_server: the server that will serve it.
        feature: the feature from ``load_feature()`` (its defined execution errors are raised by name).
        measure: ``measure(job) -> value`` or ``(value, uncertainty)``; raising ``InstrumentFault`` (or any error)
            ends the execution with ``MeasurementFailed`` and the message.
        experiment_s: wall-clock seconds each experiment takes before ``measure`` answers.
        envelope: the ``SafetyEnvelope`` the server reports; jobs outside it fail with ``MeasurementFailed``.
    """
    server_module = _sila("sila2.server")
    errors_module = _sila("sila2.framework.errors.defined_execution_error")

    class _Impl(server_module.FeatureImplementationBase):
        def __init__(self) -> None:
            super().__init__(parent_server=parent_server)
            self.measure, self.experiment_s = measure, float(experiment_s)
            self.envelope = envelope or SafetyEnvelope(name="sila2 lab")
            self.instrument = threading.Lock()  # one experiment at a time
            self.runs: dict[str, _Run] = {}
            self.runs_lock = threading.Lock()
            self.current: str | None = None
            self.n_experiments = 0  # experiments that reached the instrument

        # sila2 calls the implementation by the feature's identifiers: RunExperiment, get_InstrumentStatus, ...
        def _error(self, identifier: str, message: str) -> Exception:
            return errors_module.DefinedExecutionError(feature.defined_execution_errors[identifier], message=message)

        def RunExperiment(self, JobKey: str, Job: str, *, metadata: Any, instance: Any) -> tuple[float, float]:
            with self.runs_lock:
                run, is_new = self.runs.get(JobKey), JobKey not in self.runs
                if is_new:
                    run = self.runs[JobKey] = _Run()
            if is_new:
                self._run(JobKey, Job, run, instance)
            else:
                run.finished.wait()
            if run.is_cancelled:
                raise self._error("ExperimentCancelled", f"job {JobKey!r} was cancelled before it finished")
            if run.error is not None:
                raise self._error("MeasurementFailed", run.error)
            return run.value, -1.0 if run.uncertainty is None else run.uncertainty

        def _run(self, job_key: str, job_json: str, run: _Run, instance: Any) -> None:
            try:
                with self.instrument:
                    if run.is_cancelled:
                        return
                    self.current = job_key
                    instance.begin_execution()
                    self.n_experiments += 1
                    if run.finished.wait(self.experiment_s):  # cancelled while running
                        return
                    run.value, run.uncertainty = self._measure(job_json)
            except Exception as exc:  # noqa: BLE001 - every failure becomes MeasurementFailed with its message
                run.error = str(exc) or type(exc).__name__
            finally:
                self.current = None
                run.finished.set()

        def _measure(self, job_json: str) -> tuple[float, float | None]:
            job = LabJob.model_validate_json(job_json)
            problems = self.envelope.check(job)
            if problems:
                raise InstrumentFault("refused: " + "; ".join(problems))
            answer = self.measure(job)
            value, uncertainty = answer if isinstance(answer, tuple) else (answer, None)
            if value is None or not math.isfinite(float(value)):
                raise InstrumentFault(f"bad reading: the instrument returned {value!r}")
            return float(value), None if uncertainty is None else float(uncertainty)

        def CancelExperiment(self, JobKey: str, *, metadata: Any) -> tuple[()]:
            with self.runs_lock:
                run = self.runs.get(JobKey)
            if run is not None and not run.finished.is_set():
                run.is_cancelled = True
                if self.current == JobKey:
                    run.finished.set()  # wakes the running experiment, which stops
            return ()

        def get_InstrumentStatus(self, *, metadata: Any) -> str:
            current = self.current
            if current is None:
                return "Idle: ready for work"
            return f"Busy: running job {current!r}"

        def get_SafetyEnvelope(self, *, metadata: Any) -> str:
            return self.envelope.model_dump_json()

    return _Impl()


def serve_sila_lab(
    measure: Measure, *, host: str = "127.0.0.1", port: int = 0, experiment_s: float = 0.2,
    envelope: SafetyEnvelope | None = None, private_key: bytes | None = None, cert_chain: bytes | None = None,
    server_name: str = "closedloop SiLA lab", server_uuid: Any = None,
) -> Any:
    """Start a ``SilaServer`` serving ``ClosedLoopExperiment`` on ``host:port`` and return it (``.stop()`` it).

    ``port=0`` picks a free port, kept as ``server.sila_port``. Without ``private_key`` and ``cert_chain`` the server
    runs unencrypted, which the SiLA 2 standard allows for tests only: keep it on loopback. A SiLA certificate names
    the server's UUID, so give ``server_uuid`` with a certificate. SiLA Server Discovery (zeroconf on the network) is
    never started.
    """
    server_module = _sila("sila2.server")
    if (private_key is None) != (cert_chain is None):
        raise SetupError("pass both private_key and cert_chain for an encrypted SiLA server, or neither")
    if port == 0:
        with socket.socket() as probe:  # sila2 does not report the port gRPC bound, so choose one first
            probe.bind((host, 0))
            port = probe.getsockname()[1]
    feature = load_feature()
    server = server_module.SilaServer(
        server_name=server_name, server_type="ClosedLoopLab", server_description=(
            "A closedloop lab instrument: RunExperiment makes and measures one candidate"),
        server_version="0.1", server_vendor_url="https://github.com/closedloop", server_uuid=server_uuid,
    )
    implementation = experiment_implementation(server, feature, measure, experiment_s=experiment_s, envelope=envelope)
    server.set_feature_implementation(feature, implementation)
    if private_key is None:
        server.start_insecure(host, port, enable_discovery=False)
    else:
        server.start(host, port, private_key=private_key, cert_chain=cert_chain, enable_discovery=False)
    server.sila_port = port
    server.experiment_impl = implementation
    return server

