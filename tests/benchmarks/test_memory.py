"""Peak memory as the benchmarks read it (``benchmarks.memory``): a child's own, not its parent's."""

import subprocess
import sys

import pytest

from benchmarks.memory import peak_rss_mb, rss_mb, status_kb, wait_with_peak_rss

pytestmark = pytest.mark.skipif(status_kb("VmHWM") is None, reason="needs Linux /proc")


def test_a_small_child_of_a_large_parent_reports_its_own_peak():
    ballast = bytearray(300 * 1024 * 1024)
    ballast[::4096] = b"\x01" * len(ballast[::4096])  # touch every page: the parent's RSS grows by 300 MB
    assert rss_mb() > 300
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.5)"])
    status, peak = wait_with_peak_rss(child)
    assert status == 0
    assert 1 < peak < 100  # getrusage's ru_maxrss would say at least the parent's 300+ MB
    del ballast


def test_this_process_peak_is_at_least_its_current_rss():
    assert peak_rss_mb() >= rss_mb() > 0
