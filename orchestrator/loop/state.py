"""The graph state. It carries ids and cursors only; the ledger is the truth."""

from __future__ import annotations

from typing import TypedDict

__all__ = ["CampaignState"]


class CampaignState(TypedDict, total=False):
    """State passed between nodes and checkpointed after every step."""

    campaign_id: str
    """The campaign this graph thread drives (also the checkpointer's thread id)."""
    iteration: int
    """0-based loop iteration; events of one pass carry it."""
    proposed: list[str]
    """Candidate ids proposed in this iteration (main arm first, then control)."""
    slots: dict[str, int]
    """Lab slots per arm this iteration."""
    retries: list[str]
    """Job keys of retries going to the lab this iteration."""
    valid: list[str]
    """Proposed ids that passed validation."""
    promoted: list[str]
    """Ids promoted to the lab this iteration."""
    job_keys: list[str]
    """Lab job keys approved (then dispatched) this iteration."""
    next_node: str
    """Where ``decide`` sends the loop: ``plan``, ``observe`` (draining the lab) or ``end``."""
    is_done: bool
    """Set by ``decide`` when a stop criterion holds."""
    stop_reason: str
    ledger_seq: int
    """The campaign's ledger head (seq) when the last node finished: how much of the ledger this checkpoint has seen.
    A checkpoint behind the ledger, ahead of it or without it is put where the ledger says (``loop.position``)."""
