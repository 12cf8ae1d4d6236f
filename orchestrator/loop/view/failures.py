"""What was decided about failed lab jobs (``FailureHandled``), and the retries withdrawn before they were dispatched
(a ``Rejected`` of stage ``dispatch``: outside the lab's safety envelope)."""

from __future__ import annotations

from vocabulary.events import Event, FailureHandled, Rejected

__all__ = ["FailureDecisions"]


class FailureDecisions:
    """Fold of ``FailureHandled`` and dispatch-stage ``Rejected`` events."""

    types = frozenset({FailureHandled.type, Rejected.type})

    def __init__(self) -> None:
        self.handled: list[FailureHandled] = []
        """Every decision, in ledger order."""
        self.handled_keys: set[str] = set()
        """Job keys a decision has answered."""
        self.retries: dict[str, FailureHandled] = {}
        """Every retry ever decided, by the retry's job key."""
        self.aborts: list[FailureHandled] = []
        self.withdrawn: set[str] = set()
        """Job keys that will not be dispatched: their failure was not retried, or their dispatch was refused."""

    def on(self, event: Event) -> None:
        p = event.payload
        if event.type == Rejected.type:
            if p["stage"] == "dispatch":
                self.withdrawn.add(p["raw"])
            return
        decision = FailureHandled.model_construct(**p)
        self.handled.append(decision)
        self.handled_keys.add(decision.job_key)
        if decision.action == "retry":
            self.retries[decision.retry_key] = decision
        else:
            self.withdrawn.add(decision.job_key)
            if decision.action == "abort":
                self.aborts.append(decision)

    def pending_retries(self, dispatched: set[str]) -> list[FailureHandled]:
        """Retries decided but neither dispatched (``dispatched``: job keys) nor withdrawn, oldest first."""
        return [h for h in self.handled if h.action == "retry" and h.retry_key not in dispatched
                and h.retry_key not in self.withdrawn]
