"""What the surrogate last predicted for each candidate, in the objective's unit, from the ledger's ``Proposed`` events.

A planner records its prediction on the ``Proposed`` event: ``expected`` (the objective's value, not its utility)
and, where the planner has one, ``expected_sd`` (its sd, same unit). The approval question, ``suggest`` and the
pending-jobs table show them so a person judges a batch by what the model expects. A candidate proposed several times
shows its newest prediction; one no planner predicted (a random pick, an older ledger) has ``Prediction(None, None)``.

The read goes through the ledger's typed, cached read of ``Proposed`` events, so asking again after new events fetches
only those.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from vocabulary.events import Proposed

__all__ = ["Prediction", "predictions"]


@dataclass(frozen=True)
class Prediction:
    """A surrogate's prediction of a candidate's lab value, in the objective's unit; None where none was recorded.

    Example:
        >>> Prediction(mean=1.5, sd=0.2).text()
        '1.5 ± 0.2'
        >>> Prediction(mean=None, sd=None).text()
        '—'
    """

    mean: float | None = None
    sd: float | None = None

    def text(self) -> str:
        """The prediction as a person reads it: ``"1.5 ± 0.2"``, ``"1.5"`` without an sd, ``"—"`` without a mean."""
        if self.mean is None:
            return "—"
        return f"{self.mean:.3g}" if self.sd is None else f"{self.mean:.3g} ± {self.sd:.2g}"


def predictions(view, candidate_ids: Iterable[str]) -> dict[str, Prediction]:
    """Candidate id -> the newest prediction recorded for it (``Prediction(None, None)`` where there is none).

    ``view`` is a ``CampaignView`` (anything with ``ledger`` and ``campaign_id``).
    """
    wanted = list(dict.fromkeys(candidate_ids))
    found: dict[str, Prediction] = {}
    targets = set(wanted)
    for event in view.ledger.events(view.campaign_id, types=[Proposed.type]):
        p = event.payload
        cid = p.get("candidate_id")
        if cid in targets and p.get("expected") is not None:
            sd = p.get("expected_sd")
            found[cid] = Prediction(mean=float(p["expected"]), sd=None if sd is None else float(sd))
    return {cid: found.get(cid, Prediction()) for cid in wanted}
