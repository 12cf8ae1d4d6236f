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

The failures an executor writes itself start with ``TIMEOUT_REASON_PREFIX`` or ``WORKER_LOST_PREFIX``.
``is_transient_failure`` recognises them, so the result cache never stores them.

Example:
    >>> from vocabulary.domain import Molecule
    >>> from simulators.rdkit_descriptors import RDKitDescriptorSimulator
    >>> with make_executor("serial") as executor:
    ...     [obs] = executor.map_evaluate(RDKitDescriptorSimulator(), [Molecule.parse("CCO")], timeout_s=None)
    >>> obs.status, obs.properties["n_heavy_atoms"]
    ('ok', 3.0)
"""

from __future__ import annotations

import itertools
import math
import os
import pickle
import signal
import socket
import subprocess
import sys
import threading
import time
import weakref
from collections import deque
from collections.abc import Iterator, Sequence
from multiprocessing.connection import Connection, wait
from typing import Any, Literal, Protocol, runtime_checkable

from simulators.base import AnyCandidate, BaseSimulator, Simulator, require
from vocabulary.domain import (
    Conditions,
    Material,
    Molecule,
    Observation,
    SetupError,
    import_optional,
)

__all__ = [
    "TIMEOUT_REASON_PREFIX",
    "WORKER_LOST_PREFIX",
    "Executor",
    "ExecutorKind",
    "LocalProcessExecutor",
    "RayExecutor",
    "SerialExecutor",
    "check_batch",
    "is_transient_failure",
    "make_executor",
]

ExecutorKind = Literal["serial", "process", "ray"]

TIMEOUT_REASON_PREFIX = "timeout after"
"""The reason of an observation failed by an executor's timeout starts with this: ``"timeout after 0.5 s ..."``."""
WORKER_LOST_PREFIX = "worker lost"
"""The reason of an observation whose worker died (or whose Ray task was lost) starts with this."""

# One thread per worker: the executor already runs one worker per core.
_SINGLE_THREAD_ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
# A task's clock starts when its worker says "started"; until then this much is allowed for a fresh worker to start
# and unpickle the simulator.
_START_UP_S = 60.0
# A busy worker whose socket stays silent is checked for death this often (a grandchild may hold the socket open).
_LIVENESS_POLL_S = 1.0

Task = tuple[int, ...]
"""Positions in the batch that one worker evaluates in one go."""


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
class SerialExecutor:
    """Evaluate in this process with ``simulator.evaluate``.

    ``timeout_s`` is accepted and ignored: nothing can interrupt a calculation in the caller's own process, and a
    crash in it takes the caller down. Use ``LocalProcessExecutor`` when either matters.
    """

    def map_evaluate(
        self, simulator: Simulator, candidates: Sequence[AnyCandidate], *, timeout_s: float | None = None
    ) -> list[Observation]:
        batch = check_batch(simulator, candidates, timeout_s=timeout_s)
        return _matched(simulator, batch, simulator.evaluate(batch)) if batch else []

    def close(self) -> None:
        pass

    def __enter__(self) -> SerialExecutor:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return "SerialExecutor()"


# ----------------------------------------------------------------------------------------------------- bookkeeping
class _Run:
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
            observations = _matched(self.simulator, self.candidates(task), value)
        else:
            reason = f"{type(self.simulator).__name__}.evaluate raised instead of failing the candidate: {value}"
            observations = [_failed(self.simulator, c, reason) for c in self.candidates(task)]
        for index, obs in zip(task, observations, strict=True):
            self.results[index] = obs

    def timed_out(self, task: Task, how: str) -> None:
        if self._split(task):
            return
        reason = f"{TIMEOUT_REASON_PREFIX} {self.timeout_s:g} s ({how}); raise timeout_s if the candidate is only slow"
        self.results[task[0]] = _failed(self.simulator, self.batch[task[0]], reason, cost_s=self.timeout_s)

    def lost(self, task: Task, what: str) -> None:
        if self._split(task):
            return
        reason = f"{WORKER_LOST_PREFIX}: {what} while evaluating this candidate"
        self.results[task[0]] = _failed(self.simulator, self.batch[task[0]], reason)

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


# ----------------------------------------------------------------------------------------------------- local
class _Worker:
    """One worker process, the parent's end of its socket, and the task it is running."""

    def __init__(self, process: subprocess.Popen, conn: Connection) -> None:
        self.process = process
        self.conn = conn
        self.simulator_token = 0
        self.task: Task = ()
        self.deadline: float | None = None

    def has_exited(self) -> bool:
        """Whether the worker has ended. It is not reaped here, so its pid cannot be reused before ``kill``."""
        if self.process.returncode is not None:
            return True
        try:
            return os.waitid(os.P_PID, self.process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
        except ChildProcessError:
            return True
        except AttributeError:  # no waitid (macOS): reaping here leaves a tiny window before the kill
            return self.process.poll() is not None

    def kill(self) -> None:
        """SIGKILL the worker's process group (it leads its own session, so programs it started die too)."""
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            self.process.kill()  # a no-op once the worker has been reaped
        self._reap()

    def stop(self) -> None:
        """Ask an idle worker to exit; kill it if it does not."""
        try:
            self.conn.send(None)
            self.process.wait(timeout=2.0)
        except (OSError, subprocess.TimeoutExpired):
            self.kill()
        self._reap()

    def _reap(self) -> None:
        try:
            self.process.wait(timeout=5.0)
        except subprocess.TimeoutExpired:  # pragma: no cover - stuck in uninterruptible sleep
            pass
        self.conn.close()

    def death(self) -> str:
        code = self.process.poll()
        if code is None:
            return "its connection broke"
        if code < 0:
            try:
                return f"it was killed by {signal.Signals(-code).name}"
            except ValueError:
                return f"it was killed by signal {-code}"
        return f"it exited with code {code}"


def _kill_all(workers: list[_Worker]) -> None:
    for worker in list(workers):
        worker.kill()
    workers.clear()


class LocalProcessExecutor:
    """Evaluate in persistent local worker processes, with a per-candidate timeout.

    Args:
        max_workers: worker processes at most; ``None`` means one per CPU this process may use.
        chunk_size: candidates handed to a worker at once (1 by default). Larger chunks save round trips for cheap
            rungs and let ``calculate_batch`` batch natively. A chunk gets ``timeout_s`` per candidate; a chunk
            that times out or loses its worker is re-run one candidate at a time, so only the candidates that
            really run out of time (or crash) fail.

    Each worker is a fresh interpreter (``subprocess``, never ``fork``) started with ``OMP_NUM_THREADS=1`` (and the
    MKL and OpenBLAS equivalents) in its environment, the parent's ``sys.path``, and its own process group. The
    simulator is pickled once per call and unpickled once per worker, so its class must live at module level in an
    importable module. Workers are kept between calls, so module-level caches (loaded models) survive.

    A task's clock starts when the worker begins it, not when it was handed out, so start-up and unpickling are
    not charged to the candidate. A candidate that runs past ``timeout_s`` fails with ``"timeout after N s"``,
    charged ``timeout_s`` seconds, and its worker's process group is killed and replaced. A worker that dies fails
    its candidate with ``"worker lost: ..."``. POSIX only.

    Example:
        >>> from vocabulary.domain import Molecule
        >>> from simulators.rdkit_descriptors import RDKitDescriptorSimulator
        >>> with LocalProcessExecutor(max_workers=1) as executor:
        ...     [obs] = executor.map_evaluate(RDKitDescriptorSimulator(), [Molecule.parse("CCO")], timeout_s=60)
        >>> obs.status, obs.properties["n_heavy_atoms"]
        ('ok', 3.0)
    """

    def __init__(self, max_workers: int | None = None, *, chunk_size: int = 1) -> None:
        if os.name != "posix":
            raise SetupError("LocalProcessExecutor needs a POSIX system; use make_executor('serial') or 'ray'")
        self.max_workers = _positive_int("max_workers", _available_cpus() if max_workers is None else max_workers)
        self.chunk_size = _positive_int("chunk_size", chunk_size)
        self._workers: list[_Worker] = []
        self._idle: list[_Worker] = []
        self._tokens = itertools.count(1)
        self._lock = threading.Lock()
        # kills the workers if the executor is garbage-collected, or the interpreter exits, without close()
        self._finalizer = weakref.finalize(self, _kill_all, self._workers)

    @property
    def n_workers(self) -> int:
        """Worker processes alive now; they start on demand and are kept between calls."""
        return len(self._workers)

    def map_evaluate(
        self, simulator: Simulator, candidates: Sequence[AnyCandidate], *, timeout_s: float | None = None
    ) -> list[Observation]:
        """Evaluate ``candidates`` across the workers; see the class docstring for timeouts and crashes.

        Raises:
            SetupError: before anything runs for a bad batch, a bad ``timeout_s`` or a simulator that does not
                pickle; and when a worker reports a setup error (for one, that it cannot import the simulator).
        """
        batch = check_batch(simulator, candidates, timeout_s=timeout_s)
        if not batch:
            return []
        payload = _pickled(simulator)
        run = _Run(simulator, batch, self.chunk_size, timeout_s)
        with self._lock:  # one batch at a time: the workers' bookkeeping is not shared between calls
            token = next(self._tokens)
            busy: list[_Worker] = []
            try:
                while run.pending or busy:
                    while run.pending and (self._idle or len(self._workers) < self.max_workers):
                        busy.append(self._hand_out(run, run.pending.popleft(), payload, token))
                    wait([w.conn for w in busy], timeout=_wait_time(busy))
                    busy = [w for w in busy if not self._settle(w, run)]
            except BaseException:
                for worker in busy:  # mid-task, in an unknown state: replace them
                    self._discard(worker)
                raise
        return run.observations()

    def _hand_out(self, run: _Run, task: Task, payload: bytes, token: int) -> _Worker:
        for _attempt in range(3):  # an idle worker may have died since the last call
            worker = self._idle.pop() if self._idle else self._start_worker()
            try:
                worker.conn.send((payload if worker.simulator_token != token else None, run.candidates(task)))
            except OSError:
                self._discard(worker)
                continue
            worker.simulator_token, worker.task = token, task
            worker.deadline = run.deadline(task, is_started=False)
            return worker
        raise SetupError("three fresh worker processes died before taking work; see their output on stderr")

    def _settle(self, worker: _Worker, run: _Run) -> bool:
        """Collect the task of a worker that replied, died or ran late; False while it is still in time."""
        task = worker.task
        while worker.conn.poll():
            try:
                kind, value = worker.conn.recv()
            except Exception:  # EOF or a torn message: it died
                self._discard(worker)
                run.lost(task, worker.death())
                return True
            if kind == "started":
                worker.deadline = run.deadline(task, is_started=True)
                continue
            worker.task, worker.deadline = (), None
            self._idle.append(worker)
            run.finish(task, kind, value)
            return True
        if worker.has_exited():
            self._discard(worker)
            run.lost(task, worker.death())
            return True
        if worker.deadline is not None and time.monotonic() >= worker.deadline:
            self._discard(worker)
            run.timed_out(task, "the worker was killed")
            return True
        return False

    def _start_worker(self) -> _Worker:
        parent_sock, child_sock = socket.socketpair()
        with parent_sock, child_sock:
            try:
                process = subprocess.Popen(
                    [sys.executable, "-c", _WORKER_BOOTSTRAP, str(child_sock.fileno())],
                    pass_fds=(child_sock.fileno(),),
                    env={**os.environ, **_SINGLE_THREAD_ENV},
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                )
            except OSError as exc:
                raise SetupError(f"could not start a worker process with {sys.executable}: {exc}") from exc
            conn = Connection(parent_sock.detach())
        worker = _Worker(process, conn)
        self._workers.append(worker)
        try:
            conn.send(list(sys.path))
        except OSError:
            pass  # it died at once; handing it work finds out
        return worker

    def _discard(self, worker: _Worker) -> None:
        worker.kill()
        for pool in (self._workers, self._idle):
            if worker in pool:
                pool.remove(worker)

    def close(self) -> None:
        """Stop every worker. The executor stays usable: the next call starts new ones."""
        with self._lock:
            for worker in list(self._workers):
                worker.stop()
            self._workers.clear()
            self._idle.clear()

    def __enter__(self) -> LocalProcessExecutor:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"LocalProcessExecutor(max_workers={self.max_workers}, chunk_size={self.chunk_size})"


# The worker's entry point. It takes sys.path from the parent before importing anything of ours, so it sees the same
# modules as the parent (as multiprocessing's spawn does).
_WORKER_BOOTSTRAP = """\
import sys
from multiprocessing.connection import Connection
conn = Connection(int(sys.argv[1]))
sys.path[:] = conn.recv()
from simulators.executor import _serve
_serve(conn)
"""


def _serve(conn: Connection) -> None:
    """Run tasks until the parent sends None or goes away. Runs in the worker process."""
    os.environ.update(_SINGLE_THREAD_ENV)
    simulator: Any = None
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        if message is None:
            return
        payload, candidates = message
        if payload is not None:
            simulator = _unpickled(payload)
        for reply in _steps(simulator, candidates):
            try:
                conn.send(reply)
            except (EOFError, OSError):
                return
            except Exception as exc:  # the reply does not pickle
                conn.send(("error", f"its result could not be sent back: {type(exc).__name__}: {exc}"))


def _steps(simulator: Any, candidates: list[AnyCandidate]) -> Iterator[tuple[str, Any]]:
    """A worker's replies for one task: ``("started", None)``, then ``("ok" | "error" | "setup", value)``."""
    os.environ.update(_SINGLE_THREAD_ENV)
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


def _unpickled(payload: bytes) -> Any:
    try:
        return pickle.loads(payload)
    except Exception as exc:
        return SetupError(
            f"a worker process could not unpickle the simulator ({type(exc).__name__}: {exc}); its class must live "
            "at module level in a module the worker can import (not in a notebook or a __main__ script)"
        )


# ----------------------------------------------------------------------------------------------------- ray
class RayExecutor:
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
        self.num_cpus = None if num_cpus is None else _positive_int("num_cpus", num_cpus)
        self.chunk_size = _positive_int("chunk_size", chunk_size)
        self.max_in_flight = None if max_in_flight is None else _positive_int("max_in_flight", max_in_flight)
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
                    runtime_env={"env_vars": dict(_SINGLE_THREAD_ENV)},
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
        _pickled(simulator)  # the same early, clear error as the local executor
        ray = self._connect()
        from ray.exceptions import RayError

        limit = self.max_in_flight or max(1, int(ray.cluster_resources().get("CPU", 1)))
        simulator_ref = ray.put(simulator)
        run = _Run(simulator, batch, self.chunk_size, timeout_s)
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

    def __enter__(self) -> RayExecutor:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"RayExecutor(address={self.address!r}, num_cpus={self.num_cpus}, chunk_size={self.chunk_size})"


def _ray_task(simulator: Simulator, candidates: list[AnyCandidate]) -> Iterator[tuple[str, Any]]:
    """The body of a Ray generator task: the same replies as a local worker."""
    yield from _steps(simulator, candidates)


# ----------------------------------------------------------------------------------------------------- helpers
def _check_timeout(timeout_s: float | None) -> None:
    if timeout_s is None:
        return
    is_number = isinstance(timeout_s, (int, float)) and not isinstance(timeout_s, bool)
    if not is_number or not math.isfinite(timeout_s) or timeout_s <= 0:
        raise SetupError(f"{timeout_s=} must be a number of seconds > 0, or None for no limit")


def _positive_int(label: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SetupError(f"{label}={value!r} must be a positive integer")
    return value


def _available_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # macOS has no affinity masks
        return os.cpu_count() or 1


def _wait_time(busy: list[_Worker]) -> float:
    deadlines = [w.deadline for w in busy if w.deadline is not None]
    until_deadline = min(deadlines) - time.monotonic() if deadlines else _LIVENESS_POLL_S
    return max(0.0, min(until_deadline, _LIVENESS_POLL_S))


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__


def _pickled(simulator: Simulator) -> bytes:
    try:
        return pickle.dumps(simulator)
    except Exception as exc:
        raise SetupError(
            f"simulator {getattr(simulator, 'name', simulator)!r} cannot be pickled for worker processes ({exc}); "
            "define its class at module level and keep open files, locks and clients out of its attributes"
        ) from exc


def _failed(simulator: Simulator, candidate: AnyCandidate, reason: str, cost_s: float | None = None) -> Observation:
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


def _matched(simulator: Simulator, batch: list[AnyCandidate], observations: Any) -> list[Observation]:
    """The simulator's observations if they match the batch one to one, in order; failed ones naming the bug if not."""
    if isinstance(observations, (list, tuple)) and len(observations) == len(batch):
        if all(isinstance(o, Observation) and o.candidate_id == c.id for c, o in zip(batch, observations)):
            return list(observations)
    shown = f"{len(observations)} observations" if isinstance(observations, (list, tuple)) else "no list"
    reason = (
        f"{type(simulator).__name__}.evaluate returned {shown} that do not match the {len(batch)} candidates one "
        "to one, in order; this is a bug in the simulator"
    )
    return [_failed(simulator, candidate, reason) for candidate in batch]
