"""A lab that answers from a recorded campaign: what-if replays against a real lab reuse its measurements.

Candidates the recorded campaign measured get their recorded value (the mean of repeats); any other candidate's job
fails with a reason that starts with ``unknown``, because nobody can say what the real lab would have measured.
The driver takes the recorded values themselves, so this package never opens a ledger: the engine reads them
(``orchestrator.loop.recorded_lab.recorded_values``) when a what-if spec names the recorded campaign.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from instruments.oracle import MeasuredProperty, TableOracle
from instruments.simlab import SimLabDriver

__all__ = ["RecordedLabDriver", "UNKNOWN_PREFIX"]

UNKNOWN_PREFIX = "unknown"


class _RecordedOracle(TableOracle):
    def __call__(self, candidate: Any) -> float:
        from vocabulary.domain import InstrumentFault

        if candidate.id not in self:
            raise InstrumentFault(f"{UNKNOWN_PREFIX}: the recorded campaign never measured {candidate.id}, so its "
                                  "lab result is unknown in this what-if")
        return super().__call__(candidate)


class RecordedLabDriver(SimLabDriver):
    """The simulated lab's scheduling, with the recorded campaign's results as ground truth and no added noise.

    Args:
        values: candidate id -> the recorded lab value (the mean of its successful repeats), in the objective's
            unit.
        measured_values: every other property the recorded campaign measured (further objectives, constraints):
            property -> candidate id -> recorded value (NaN where that result lacks it).
        **params: SimLab keyword arguments (stations, durations_s, ...), except oracle and noise.
    """

    name = "recorded"

    def __init__(self, *, values: Mapping[str, float], measured_values: Mapping[str, Mapping[str, float]] | None = None,
                 **params: Any) -> None:
        params.pop("oracle", None)
        params["noise_sd"] = 0.0
        measured = {name: MeasuredProperty(_RecordedOracle(dict(by_id), property=name), noise_sd=0.0, is_required=False)
                    for name, by_id in (measured_values or {}).items()}
        super().__init__(oracle=_RecordedOracle(dict(values), property="recorded"), measured=measured or None,
                         **params)
