"""Resident memory of a process as Linux counts it for that program alone (``/proc/<pid>/status``).

``getrusage``'s ``ru_maxrss`` is not that: Linux carries a process's high-water mark across ``execve``, so a child
started from a large parent reports at least the parent's RSS at the fork (a ``python -c pass`` started from a
500 MB parent reports 512 MB). ``VmHWM`` belongs to the memory map the program itself built, so it starts afresh at
``execve``. Where ``/proc`` is missing (not Linux), ``ru_maxrss`` is the fallback.
"""

from __future__ import annotations

import resource
import subprocess
import sys
import time
from pathlib import Path

__all__ = ["peak_rss_mb", "rss_mb", "status_kb", "wait_with_peak_rss"]


def status_kb(field: str, pid: int | str = "self") -> int | None:
    """A ``/proc/<pid>/status`` field in kB (``VmRSS``, ``VmHWM``), or None when there is no such field or process."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return None


def rss_mb() -> float:
    """This process's resident set size now, MB."""
    kb = status_kb("VmRSS")
    return float("nan") if kb is None else kb / 1024


def peak_rss_mb() -> float:
    """This process's peak resident set size since it started its program, MB (``VmHWM``)."""
    kb = status_kb("VmHWM")
    if kb is None:
        scale = 1 if sys.platform == "darwin" else 1024  # bytes on macOS, kB on Linux
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / scale / 1024
    return kb / 1024


def wait_with_peak_rss(process: subprocess.Popen, *, every_s: float = 0.02) -> tuple[int, float]:
    """Wait for ``process``; its exit status and its own peak RSS in MB, read from ``VmHWM`` while it runs (a
    high-water mark, so only a peak in the last ``every_s`` before exit can be missed)."""
    peak_kb = 0
    while process.poll() is None:
        kb = status_kb("VmHWM", process.pid)
        if kb is not None:
            peak_kb = max(peak_kb, kb)
        time.sleep(every_s)
    if peak_kb == 0:  # no /proc: every waited child's high-water mark, an upper bound
        return process.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return process.returncode, peak_kb / 1024
