"""A rung's calibration is reused while its inputs stand, and computed again when they change."""

from __future__ import annotations

from types import SimpleNamespace

from orchestrator.loop.beliefs import _calibrated
from orchestrator.policy.escalation import calibrate_rung


def test_a_calibration_is_reused_only_for_the_same_inputs():
    ctx = SimpleNamespace(view=SimpleNamespace(calibration_memo={}))
    pairs = [(-3.0, -2.5), (-5.0, -4.0), (-7.5, -8.0), (-1.0, -1.5), (-9.0, -8.2)]
    first = _calibrated(ctx, "gaff", pairs, 2.0, -5.0)
    assert first == calibrate_rung("gaff", pairs, spread=2.0, centre=-5.0)
    assert _calibrated(ctx, "gaff", list(pairs), 2.0, -5.0) is first  # same lab pairs: not fitted again
    more = _calibrated(ctx, "gaff", [*pairs, (-4.0, -3.0)], 2.0, -5.0)
    assert more is not first and more.n_pairs == 6
    assert _calibrated(ctx, "gaff", [*pairs, (-4.0, -3.0)], 3.0, -5.0).intercept != more.intercept  # spread counts
    assert set(ctx.view.calibration_memo) == {"gaff"}, "one calibration is kept per rung"
