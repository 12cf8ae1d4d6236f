"""``RayExecutor``: a simulator's batch as Ray tasks (``pip install "closedloop[ray]"``), with the same timeouts and
re-run rules as the local worker processes (``executor_batch`` keeps the books).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from typing import Any

from simulators.base import AnyCandidate, Simulator, require
from simulators.executor_batch import (
    SINGLE_THREAD_ENV,
    BatchRun,
    ClosesOnExit,
    check_batch,
    pickled_simulator,
    positive_int,
    worker_replies,
)
from vocabulary.domain import Observation, SetupError, import_optional

__all__ = ["RayExecutor"]


class RayExecutor(ClosesOnExit):
    """Evaluate as Ray tasks: ``pip install "closedloop[ray]"``.

    Args:
        address: the Ray cluster to join. ``None`` uses the one this process has joined already, or else lets
            ``ray.init`` find or start one; a local instance it starts has no dashboard.
        num_cpus: CPUs of a local instance this executor starts (ignored when joining a cluster).
        chunk_size: candidates per task, with the same timeout and re-run rules as ``LocalProcessExecutor``.
        max_in_flight: tasks submitted at once; ``None`` means the cluster's CPU count.

    Each task asks for one CPU and is never retried by Ray. Tasks are Ray generators that report ``"started"``
    before evaluating, so the clock of ``timeout_s`` starts when the task runs, not while it waits for a worker.
    A late task is cancelled with ``ray.cancel(force=True)``, which kills its worker; a task whose worker dies
    fails its candidate with ``"worker lost: ..."``. ``close()`` shuts Ray down only if this executor started it.
    """

    def __init__(
        self,
        address: str | None = None,
        num_cpus: int | None = None,
        *,
        chunk_size: int = 1,
        max_in_flight: int | None = None,
    ) -> None:
        require("ray", "ray", purpose="RayExecutor")
        self.address = address
        self.num_cpus = None if num_cpus is None else positive_int("num_cpus", num_cpus)
        self.chunk_size = positive_int("chunk_size", chunk_size)
        self.max_in_flight = None if max_in_flight is None else positive_int("max_in_flight", max_in_flight)
        self._is_owner = False
        self._task: Any = None

    def _connect(self) -> Any:
        ray = import_optional("ray", "ray", "RayExecutor")

        if not ray.is_initialized():
            local = {"num_cpus": self.num_cpus} if self.address is None else {}
            try:
                ray.init(
                    address=self.address,
                    include_dashboard=False,
                    log_to_driver=False,
                    ignore_reinit_error=True,
                    runtime_env={"env_vars": dict(SINGLE_THREAD_ENV)},
                    **local,
                )
            except Exception as exc:
                raise SetupError(f"could not start or join Ray (address={self.address!r}): {exc}") from exc
            self._is_owner = True
        if self._task is None:
            self._task = ray.remote(num_cpus=1, max_retries=0)(_ray_task)
        return ray

    def map_evaluate(
        self, simulator: Simulator, candidates: Sequence[AnyCandidate], *, timeout_s: float | None = None
    ) -> list[Observation]:
        """Evaluate ``candidates`` as Ray tasks; see the class docstring for timeouts and crashes."""
        batch = check_batch(simulator, candidates, timeout_s=timeout_s)
        if not batch:
            return []
        pickled_simulator(simulator)  # the same early, clear error as the local executor
        ray = self._connect()
        from ray.exceptions import RayError

        limit = self.max_in_flight or max(1, int(ray.cluster_resources().get("CPU", 1)))
        simulator_ref = ray.put(simulator)
        run = BatchRun(simulator, batch, self.chunk_size, timeout_s)
        in_flight: list[list[Any]] = []  # [generator, task, deadline]
        try:
            while run.pending or in_flight:
                while run.pending and len(in_flight) < limit:
                    task = run.pending.popleft()
                    generator = self._task.remote(simulator_ref, run.candidates(task))
                    in_flight.append([generator, task, run.deadline(task, is_started=False)])
                deadlines = [deadline for _, _, deadline in in_flight if deadline is not None]
                wait_s = max(0.0, min(deadlines) - time.monotonic()) if deadlines else None
                ray.wait([entry[0] for entry in in_flight], num_returns=1, timeout=wait_s)
                ready, _ = ray.wait([entry[0] for entry in in_flight], num_returns=len(in_flight), timeout=0)
                for entry in [e for e in in_flight if any(e[0] is r for r in ready)]:
                    generator, task, _deadline = entry
                    try:
                        kind, value = ray.get(next(generator))
                    except (RayError, StopIteration) as exc:
                        in_flight.remove(entry)
                        run.lost(task, f"its Ray task failed ({_first_line(exc)})")
                        continue
                    if kind == "started":
                        entry[2] = run.deadline(task, is_started=True)
                        continue
                    in_flight.remove(entry)
                    run.finish(task, kind, value)
                now = time.monotonic()
                for entry in [e for e in in_flight if e[2] is not None and now >= e[2]]:
                    ray.cancel(entry[0], force=True)
                    in_flight.remove(entry)
                    run.timed_out(entry[1], "the Ray task was cancelled")
        except BaseException:
            for generator, _task, _deadline in in_flight:
                ray.cancel(generator, force=True)
            raise
        return run.observations()

    def close(self) -> None:
        """Shut Ray down if this executor started it."""
        if self._is_owner:
            ray = import_optional("ray", "ray", "RayExecutor")

            ray.shutdown()
            self._is_owner = False
        self._task = None

    def __repr__(self) -> str:
        return f"RayExecutor(address={self.address!r}, num_cpus={self.num_cpus}, chunk_size={self.chunk_size})"


def _ray_task(simulator: Simulator, candidates: list[AnyCandidate]) -> Iterator[tuple[str, Any]]:
    """The body of a Ray generator task: the same replies as a local worker."""
    yield from worker_replies(simulator, candidates)


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__
