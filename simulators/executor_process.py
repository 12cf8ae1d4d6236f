"""``LocalProcessExecutor``: a simulator's batch in persistent local worker processes, with a per-candidate timeout.

Each worker is a fresh interpreter talking over a socket; one that runs late is killed with its process group and
replaced, one that dies fails only the candidate it was running (``executor_batch`` keeps the books).
"""

from __future__ import annotations

import itertools
import os
import pickle
import signal
import socket
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Sequence
from multiprocessing.connection import Connection, wait
from typing import Any

from simulators.base import AnyCandidate, Simulator
from simulators.executor_batch import (
    SINGLE_THREAD_ENV,
    BatchRun,
    ClosesOnExit,
    Task,
    check_batch,
    pickled_simulator,
    positive_int,
    worker_replies,
)
from vocabulary.domain import Observation, SetupError

__all__ = ["LocalProcessExecutor"]

# A busy worker whose socket stays silent is checked for death this often (a grandchild may hold the socket open).
_LIVENESS_POLL_S = 1.0


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


class LocalProcessExecutor(ClosesOnExit):
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
        self.max_workers = positive_int("max_workers", _available_cpus() if max_workers is None else max_workers)
        self.chunk_size = positive_int("chunk_size", chunk_size)
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
        payload = pickled_simulator(simulator)
        run = BatchRun(simulator, batch, self.chunk_size, timeout_s)
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

    def _hand_out(self, run: BatchRun, task: Task, payload: bytes, token: int) -> _Worker:
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

    def _settle(self, worker: _Worker, run: BatchRun) -> bool:
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
                    env={**os.environ, **SINGLE_THREAD_ENV},
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

    def __repr__(self) -> str:
        return f"LocalProcessExecutor(max_workers={self.max_workers}, chunk_size={self.chunk_size})"


# The worker's entry point. It takes sys.path from the parent before importing anything of ours, so it sees the same
# modules as the parent (as multiprocessing's spawn does).
_WORKER_BOOTSTRAP = """\
import sys
from multiprocessing.connection import Connection
conn = Connection(int(sys.argv[1]))
sys.path[:] = conn.recv()
from simulators.executor_process import _serve
_serve(conn)
"""


def _serve(conn: Connection) -> None:
    """Run tasks until the parent sends None or goes away. Runs in the worker process."""
    os.environ.update(SINGLE_THREAD_ENV)
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
        for reply in worker_replies(simulator, candidates):
            try:
                conn.send(reply)
            except (EOFError, OSError):
                return
            except Exception as exc:  # the reply does not pickle
                conn.send(("error", f"its result could not be sent back: {type(exc).__name__}: {exc}"))


def _unpickled(payload: bytes) -> Any:
    try:
        return pickle.loads(payload)
    except Exception as exc:
        return SetupError(
            f"a worker process could not unpickle the simulator ({type(exc).__name__}: {exc}); its class must live "
            "at module level in a module the worker can import (not in a notebook or a __main__ script)"
        )


def _available_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # macOS has no affinity masks
        return os.cpu_count() or 1


def _wait_time(busy: list[_Worker]) -> float:
    deadlines = [w.deadline for w in busy if w.deadline is not None]
    until_deadline = min(deadlines) - time.monotonic() if deadlines else _LIVENESS_POLL_S
    return max(0.0, min(until_deadline, _LIVENESS_POLL_S))
