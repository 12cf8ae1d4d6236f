"""A small soak: a few hundred lab experiments through the whole loop, with memory that does not grow with them.

The full soak (10,000 experiments, numbers in ``benchmarks/results/soak.json``) is ``python -m benchmarks.soak``.
"""

from __future__ import annotations

import pytest


@pytest.mark.slow
def test_a_long_campaign_runs_to_the_end_in_bounded_memory():
    from benchmarks.soak import run_soak

    result = run_soak(400, batch=50, n_marks=4)
    assert result.status == "stopped" and result.is_verified
    assert [int(p["n_lab"]) for p in result.progress] == [100, 200, 300, 400]
    first, last = result.progress[0], result.progress[-1]
    # three times the experiments (and the ledger) must not mean a proportionally larger process
    assert last["rss_mb"] / first["rss_mb"] < 1.3, result.progress
