"""One executor call's batch: the setup checks before any work is handed out, the bookkeeping of its tasks, and the
observations an executor writes on a simulator's behalf.

Shared by the executors that hand work out (``executor_process``, ``executor_ray``): a batch is cut into tasks of
``chunk_size`` candidates; a task that times out or loses its worker is split and re-run one candidate at a time,
so only the guilty candidate fails. The failures an executor writes itself start with ``TIMEOUT_REASON_PREFIX`` or
``WORKER_LOST_PREFIX``; ``is_transient_failure`` recognises them, so the result cache never stores them.
"""

from __future__ import annotations

import math
import os
import pickle
import time
from collections import deque
from collections.abc import Iterator, Sequence
from typing import Any, Self

from simulators.base import AnyCandidate, BaseSimulator, Simulator
from vocabulary.domain import (
    Conditions,
    Material,
    Molecule,
    Observation,
    SetupError,
)

__all__ = [
    "SINGLE_THREAD_ENV",
    "TIMEOUT_REASON_PREFIX",
    "WORKER_LOST_PREFIX",
    "BatchRun",
    "ClosesOnExit",
    "Task",
    "check_batch",
    "failed_observation",
    "is_transient_failure",
    "matched_observations",
    "pickled_simulator",
    "positive_int",
    "worker_replies",
]

TIMEOUT_REASON_PREFIX = "timeout after"
"""The reason of an observation failed by an executor's timeout starts with this: ``"timeout after 0.5 s ..."``."""
WORKER_LOST_PREFIX = "worker lost"
"""The reason of an observation whose worker died (or whose Ray task was lost) starts with this."""

#: One thread per worker: the executor already runs one worker per core.
SINGLE_THREAD_ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
# A task's clock starts when its worker says "started"; until then this much is allowed for a fresh worker to start
# and unpickle the simulator.
_START_UP_S = 60.0

Task = tuple[int, ...]
"""Positions in the batch that one worker evaluates in one go."""


def is_transient_failure(observation: Observation) -> bool:
    """Whether a failed observation was written by an executor (timeout, lost worker) rather than the calculation.

    Such failures depend on the machine and the moment, so they are never cached; a retry may succeed.

    Example:
        >>> is_transient_failure(Observation(candidate_id="x", source="s", status="failed", reason="timeout after 5 s"))
        True
        >>> is_transient_failure(Observation(candidate_id="x", source="s", status="failed", reason="SCF diverged"))
        False
    """
    reason = observation.reason or ""
    return observation.status == "failed" and reason.startswith((TIMEOUT_REASON_PREFIX, WORKER_LOST_PREFIX))


def check_batch(
    simulator: Simulator, candidates: Sequence[AnyCandidate], *, timeout_s: float | None = None
) -> list[AnyCandidate]:
    """The batch as a list, after the setup checks that must pass before any work is handed out.

    Raises:
        SetupError: for a ``timeout_s`` that is not a positive number of seconds, a bare candidate or string
            instead of a sequence and, for a ``BaseSimulator``, a wrong candidate kind or a missing dependency.
    """
    _check_timeout(timeout_s)
    if isinstance(candidates, (str, bytes, Molecule, Material, Conditions)):
        raise SetupError(
            f"an executor takes a sequence of candidates, not a {type(candidates).__name__}; wrap it: [candidate]"
        )
    batch = list(candidates)
    if isinstance(simulator, BaseSimulator):
        simulator.check_setup(batch)
    return batch


class ClosesOnExit:
    """``with executor:`` closes the executor on the way out (its ``close()``)."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class BatchRun:
    """One ``map_evaluate`` call: the tasks still to hand out and the observations collected so far."""

    def __init__(self, simulator: Simulator, batch: list[AnyCandidate], chunk_size: int, timeout_s: float | None):
        self.simulator = simulator
        self.batch = batch
        self.timeout_s = timeout_s
        self.pending: deque[Task] = deque(
            tuple(range(start, min(start + chunk_size, len(batch)))) for start in range(0, len(batch), chunk_size)
        )
        self.results: list[Observation | None] = [None] * len(batch)

    def candidates(self, task: Task) -> list[AnyCandidate]:
        return [self.batch[i] for i in task]

    def deadline(self, task: Task, *, is_started: bool) -> float | None:
        if self.timeout_s is None:
            return None
        return time.monotonic() + self.timeout_s * len(task) + (0.0 if is_started else _START_UP_S)

    def finish(self, task: Task, kind: str, value: Any) -> None:
        """Record a worker's reply: ``("ok", observations)``, ``("error", text)`` or ``("setup", text)``."""
        if kind == "setup":
            raise SetupError(value)
        if kind == "ok":
            observations = matched_observations(self.simulator, self.candidates(task), value)
        else:
            reason = f"{type(self.simulator).__name__}.evaluate raised instead of failing the candidate: {value}"
            observations = [failed_observation(self.simulator, c, reason) for c in self.candidates(task)]
        for index, obs in zip(task, observations, strict=True):
            self.results[index] = obs

    def timed_out(self, task: Task, how: str) -> None:
        if self._split(task):
            return
        reason = f"{TIMEOUT_REASON_PREFIX} {self.timeout_s:g} s ({how}); raise timeout_s if the candidate is only slow"
        self.results[task[0]] = failed_observation(self.simulator, self.batch[task[0]], reason, cost_s=self.timeout_s)

    def lost(self, task: Task, what: str) -> None:
        if self._split(task):
            return
        reason = f"{WORKER_LOST_PREFIX}: {what} while evaluating this candidate"
        self.results[task[0]] = failed_observation(self.simulator, self.batch[task[0]], reason)

    def _split(self, task: Task) -> bool:
        # a chunk that fails as a whole is re-run one candidate at a time, so only the guilty candidate fails
        if len(task) == 1:
            return False
        self.pending.extendleft((i,) for i in reversed(task))
        return True

    def observations(self) -> list[Observation]:
        missing = [self.batch[i].id for i, obs in enumerate(self.results) if obs is None]
        if missing:  # never hand back a partial batch as if it were complete
            raise RuntimeError(f"the executor lost track of {missing}; this is a bug in simulators.executor")
        return list(self.results)  # type: ignore[arg-type]


def worker_replies(simulator: Any, candidates: list[AnyCandidate]) -> Iterator[tuple[str, Any]]:
    """A worker's replies for one task: ``("started", None)``, then ``("ok" | "error" | "setup", value)``."""
    os.environ.update(SINGLE_THREAD_ENV)
    if isinstance(simulator, SetupError):  # it did not unpickle here
        yield "setup", str(simulator)
        return
    yield "started", None
    try:
        yield "ok", simulator.evaluate(candidates)
    except SetupError as exc:
        yield "setup", str(exc)
    except Exception as exc:
        yield "error", f"{type(exc).__name__}: {exc}"


def _check_timeout(timeout_s: float | None) -> None:
    if timeout_s is None:
        return
    is_number = isinstance(timeout_s, (int, float)) and not isinstance(timeout_s, bool)
    if not is_number or not math.isfinite(timeout_s) or timeout_s <= 0:
        raise SetupError(f"{timeout_s=} must be a number of seconds > 0, or None for no limit")


def positive_int(label: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SetupError(f"{label}={value!r} must be a positive integer")
    return value


def pickled_simulator(simulator: Simulator) -> bytes:
    try:
        return pickle.dumps(simulator)
    except Exception as exc:
        raise SetupError(
            f"simulator {getattr(simulator, 'name', simulator)!r} cannot be pickled for worker processes ({exc}); "
            "define its class at module level and keep open files, locks and clients out of its attributes"
        ) from exc


def failed_observation(simulator: Simulator, candidate: AnyCandidate, reason: str, cost_s: float | None = None) -> Observation:
    """A failed observation written on the simulator's behalf, with its provenance and cost model."""
    if cost_s is None:
        try:
            cost_s = float(simulator.cost_model(candidate))
        except Exception:
            cost_s = 0.0
        cost_s = cost_s if math.isfinite(cost_s) and cost_s >= 0 else 0.0
    return Observation(
        candidate_id=candidate.id,
        source=simulator.name,
        source_version=simulator.version,
        fidelity=simulator.fidelity,
        parameters=dict(getattr(simulator, "parameters", None) or {}),
        status="failed",
        reason=reason,
        cost_s=cost_s,
    )


def matched_observations(simulator: Simulator, batch: list[AnyCandidate], observations: Any) -> list[Observation]:
    """The simulator's observations if they match the batch one to one, in order; failed ones naming the bug if not."""
    if isinstance(observations, (list, tuple)) and len(observations) == len(batch):
        if all(isinstance(o, Observation) and o.candidate_id == c.id for c, o in zip(batch, observations)):
            return list(observations)
    shown = f"{len(observations)} observations" if isinstance(observations, (list, tuple)) else "no list"
    reason = (
        f"{type(simulator).__name__}.evaluate returned {shown} that do not match the {len(batch)} candidates one "
        "to one, in order; this is a bug in the simulator"
    )
    return [failed_observation(simulator, candidate, reason) for candidate in batch]
