"""pymatgen's oxidation-state guesses remembered on this machine, across processes and runs.

``Composition.oxi_state_guesses`` enumerates combinations: over the 494 band-gap formulas its median is 1 ms, but
19 formulas take over 0.1 s and the slowest 2.5 s (K4Ba2Nb4S22), 13 s for the pool. Every campaign, environment
worker and notebook kernel paid that again for each formula it met. The guesses are a pure function of the formula
and pymatgen's version, so they are kept in a small SQLite file (``oxidation_states.sqlite``) in the user cache
folder: ``$CLOSEDLOOP_CACHE_DIR``, else ``$XDG_CACHE_HOME/closedloop``, else ``~/.cache/closedloop``. Set
``CLOSEDLOOP_CACHE_DIR=off`` to turn it off.

Rows are inserted with ``INSERT OR IGNORE`` under WAL and a busy timeout, so processes share the file without
conflicts, and a stored answer is never overwritten. The cache is an accelerator only: if the folder cannot be
written or the file is damaged, one warning is logged and the guesses are computed as before.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import threading
from pathlib import Path

__all__ = ["GuessStore", "cache_folder", "shared_store"]

logger = logging.getLogger(__name__)

_FILE_NAME = "oxidation_states.sqlite"
_OFF = {"off", "0", "false", "no", "none"}


def cache_folder() -> Path | None:
    """The user cache folder (see the module docstring), or None when ``CLOSEDLOOP_CACHE_DIR`` turns it off."""
    configured = os.environ.get("CLOSEDLOOP_CACHE_DIR")
    if configured is not None:
        return None if configured.strip().lower() in _OFF or not configured.strip() else Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "closedloop"


class GuessStore:
    """One SQLite file of (key → JSON guesses); thread-safe; ``get``/``put`` never raise for I/O trouble.

    Example:
        >>> import tempfile
        >>> store = GuessStore(Path(tempfile.mkdtemp()) / "guesses.sqlite")
        >>> store.put("Fe2O3", ({"Fe": 3.0, "O": -2.0},))
        >>> store.get("Fe2O3"), store.get("FeO")
        (({'Fe': 3.0, 'O': -2.0},), None)
    """

    def __init__(self, path: Path):
        self.path = path
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._is_broken = False

    def _connection(self) -> sqlite3.Connection | None:
        if self._conn is None and not self._is_broken:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                conn = sqlite3.connect(self.path, timeout=5.0, check_same_thread=False, isolation_level=None)
                conn.execute("PRAGMA busy_timeout = 5000")
                conn.execute("PRAGMA journal_mode = WAL")
                conn.execute("CREATE TABLE IF NOT EXISTS guesses (key TEXT PRIMARY KEY, guesses TEXT NOT NULL)")
                self._conn = conn
            except (OSError, sqlite3.Error) as exc:
                self._give_up(exc)
        return self._conn

    def _give_up(self, exc: Exception) -> None:
        self._is_broken = True
        self._conn = None
        logger.warning("the oxidation-state cache %s cannot be used (%s); guesses are computed in each process. "
                       "Set CLOSEDLOOP_CACHE_DIR to a writable folder, or to 'off'", self.path, exc)

    def get(self, key: str) -> tuple[dict[str, float], ...] | None:
        with self._lock:
            conn = self._connection()
            if conn is None:
                return None
            try:
                row = conn.execute("SELECT guesses FROM guesses WHERE key = ?", (key,)).fetchone()
                return None if row is None else tuple(json.loads(row[0]))
            except (sqlite3.Error, ValueError) as exc:
                self._give_up(exc)
                return None

    def put(self, key: str, guesses) -> None:
        with self._lock:
            conn = self._connection()
            if conn is None:
                return
            try:
                conn.execute("INSERT OR IGNORE INTO guesses (key, guesses) VALUES (?, ?)",
                             (key, json.dumps([{str(k): float(v) for k, v in g.items()} for g in guesses])))
            except sqlite3.Error as exc:
                self._give_up(exc)

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None


_SHARED: dict[Path | None, GuessStore | None] = {}
_SHARED_LOCK = threading.Lock()


def shared_store() -> GuessStore | None:
    """This process's store for the current cache folder (None when turned off)."""
    folder = cache_folder()
    with _SHARED_LOCK:
        if folder not in _SHARED:
            _SHARED[folder] = None if folder is None else GuessStore(folder / _FILE_NAME)
        return _SHARED[folder]
