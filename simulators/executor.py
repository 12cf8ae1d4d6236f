"""Executors: where a simulator's batch runs (in process, in local worker processes, or on Ray).

An executor takes a simulator and a batch of candidates and returns one ``Observation`` per candidate, in order,
exactly like ``Simulator.evaluate``. What it adds is isolation: a candidate that runs past ``timeout_s`` or kills
its worker comes back as a failed observation and the rest of the batch carries on.

- ``SerialExecutor`` calls ``simulator.evaluate`` in this process. No isolation and no timeouts.
- ``LocalProcessExecutor`` keeps worker processes busy with one candidate (or chunk) each. A worker that runs out
  of time is killed with its process group and replaced. A worker that dies (segfault, ``os._exit``) fails only
  the candidate it was running.
- ``RayExecutor`` runs the same work as Ray tasks (``pip install "closedloop[ray]"``) and cancels late ones with
  ``ray.cancel(force=True)``.

The local and Ray executors live in ``executor_process`` and ``executor_ray``; the bookkeeping they share (the
batch's tasks, the failures an executor writes itself and ``is_transient_failure``, which keeps those out of the
result cache) in ``executor_batch``.

Example:
    >>> from vocabulary.domain import Molecule
    >>> from simulators.rdkit_descriptors import RDKitDescriptorSimulator
    >>> with make_executor("serial") as executor:
    ...     [obs] = executor.map_evaluate(RDKitDescriptorSimulator(), [Molecule.parse("CCO")], timeout_s=None)
    >>> obs.status, obs.properties["n_heavy_atoms"]
    ('ok', 3.0)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, Protocol, runtime_checkable

from simulators.base import AnyCandidate, Simulator
from simulators.executor_batch import ClosesOnExit, check_batch, matched_observations
from simulators.executor_process import LocalProcessExecutor
from simulators.executor_ray import RayExecutor
from vocabulary.domain import Observation, SetupError

__all__ = ["Executor", "ExecutorKind", "SerialExecutor", "make_executor"]

ExecutorKind = Literal["serial", "process", "ray"]


@runtime_checkable
class Executor(Protocol):
    """Runs a simulator over a batch: one observation per candidate, in order."""

    def map_evaluate(
        self, simulator: Simulator, candidates: Sequence[AnyCandidate], *, timeout_s: float | None
    ) -> list[Observation]:
        """Evaluate every candidate; one that exceeds ``timeout_s`` seconds comes back failed.

        Raises:
            SetupError: before anything runs, when the batch cannot run at all.
        """
        ...

    def close(self) -> None:
        """Release workers; idempotent."""
        ...


def make_executor(kind: ExecutorKind, **options: Any) -> Executor:
    """Build an executor by name: ``"serial"``, ``"process"`` (``LocalProcessExecutor``) or ``"ray"``.

    Example:
        >>> make_executor("process", max_workers=2)
        LocalProcessExecutor(max_workers=2, chunk_size=1)
    """
    kinds: dict[str, type] = {"serial": SerialExecutor, "process": LocalProcessExecutor, "ray": RayExecutor}
    if kind not in kinds:
        raise SetupError(f"executor kind {kind!r} is unknown; use one of {sorted(kinds)}")
    try:
        return kinds[kind](**options)
    except TypeError as exc:
        raise SetupError(f"options {sorted(options)} do not fit the {kind!r} executor: {exc}") from exc


# ----------------------------------------------------------------------------------------------------- serial
class SerialExecutor(ClosesOnExit):
    """Evaluate in this process with ``simulator.evaluate``.

    ``timeout_s`` is accepted and ignored: nothing can interrupt a calculation in the caller's own process, and a
    crash in it takes the caller down. Use ``LocalProcessExecutor`` when either matters.
    """

    def map_evaluate(
        self, simulator: Simulator, candidates: Sequence[AnyCandidate], *, timeout_s: float | None = None
    ) -> list[Observation]:
        batch = check_batch(simulator, candidates, timeout_s=timeout_s)
        return matched_observations(simulator, batch, simulator.evaluate(batch)) if batch else []

    def close(self) -> None:
        pass

    def __repr__(self) -> str:
        return "SerialExecutor()"
