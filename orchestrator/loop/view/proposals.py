"""What the planners proposed and validation refused: the newest iteration's proposals, each candidate's first arm,
the candidates refused for good, and the picks an llm arm took from bo (anchor) or fell back on."""

from __future__ import annotations

from vocabulary.events import Event, Proposed, Rejected

__all__ = ["Proposals"]


class Proposals:
    """Fold of ``Proposed`` and ``Rejected`` events."""

    types = frozenset({Proposed.type, Rejected.type})

    def __init__(self) -> None:
        self.iteration = -1
        """The newest iteration with a proposal (-1 before any)."""
        self._newest: list[Proposed] = []
        self.first_arm: dict[str, str] = {}
        """Candidate id -> the arm that first proposed it."""
        self.rejected_for_good: set[str] = set()
        """Candidates validation rejected as invalid or out of space (not mere duplicates)."""
        self.denied_at: dict[str, int] = {}
        """Candidate id -> the newest iteration a person denied it at approval (``ruled_out.held_after_denial``)."""
        self.sources: dict[tuple[str, str], str] = {}
        """(arm, candidate id) -> ``"anchor"`` or ``"fallback"``, as its ``Proposed`` record says."""

    def on(self, event: Event) -> None:
        p = event.payload
        if event.type == Rejected.type:
            if p["candidate_id"] and p.get("stage") == "approve":
                self.denied_at[p["candidate_id"]] = max(p["iteration"], self.denied_at.get(p["candidate_id"], -1))
            elif p["candidate_id"] and "duplicate" not in p["reason"]:
                self.rejected_for_good.add(p["candidate_id"])
            return
        if p["iteration"] > self.iteration:
            self.iteration, self._newest = p["iteration"], []
        if p["iteration"] == self.iteration:
            self._newest.append(Proposed.model_construct(**p))
        self.first_arm.setdefault(p["candidate_id"], p["arm"])
        if p.get("is_anchor") or p.get("is_fallback"):
            self.sources[(p["arm"], p["candidate_id"])] = "anchor" if p.get("is_anchor") else "fallback"

    def of_iteration(self, iteration: int) -> list[Proposed]:
        """The proposals recorded in ``iteration``, in ledger order (read-only; none for an older iteration)."""
        return list(self._newest) if iteration == self.iteration else []
