"""The candidates a ledger recorded, and the labels a person reads for them (SMILES, formula, ``name=value``).

Candidate ids are InChIKeys, reduced formulas or hashes: keys for the machine, never shown to a user. Every
candidate that reached a campaign (proposed, imported, generated) is in the ledger's candidate table with its
canonical JSON, so the labels come from the ledger alone, without the pool file.

Example:
    >>> from orchestrator.ledger import Ledger
    >>> from vocabulary.events import CampaignStarted, Proposed
    >>> ledger = Ledger.open(":memory:")
    >>> _ = ledger.append("c1", CampaignStarted(name="demo", seed=0, spec={}), key="started")
    >>> ethanol = {"type": "molecule", "smiles": "CCO", "id": "LFQSCWFLJHTTHZ-UHFFFAOYSA-N"}
    >>> _ = ledger.append("c1", Proposed(iteration=0, arm="bo", candidate_id=ethanol["id"], candidate=ethanol), key="p")
    >>> candidate_labels(ledger, "c1")
    {'LFQSCWFLJHTTHZ-UHFFFAOYSA-N': 'CCO'}
"""

from __future__ import annotations

import json

from orchestrator.ledger import Ledger
from orchestrator.space.pool import describe
from vocabulary.domain import Candidate, candidate_from_dict

__all__ = ["candidate_labels", "recorded_candidates"]


def recorded_candidates(ledger: Ledger, campaign_id: str) -> dict[str, Candidate]:
    """Candidate id -> candidate, for every candidate the campaign's ledger recorded."""
    return {row.candidate_id: candidate_from_dict(json.loads(row.canonical)) for row in ledger.candidates(campaign_id)}


def candidate_labels(ledger: Ledger, campaign_id: str) -> dict[str, str]:
    """Candidate id -> its label (``pool.describe``), for every candidate the campaign's ledger recorded."""
    return {cid: describe(candidate) for cid, candidate in recorded_candidates(ledger, campaign_id).items()}
