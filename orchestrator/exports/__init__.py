"""Trajectory exports for training: native JSONL, TRL (GRPO prompts, stepwise supervision), verifiers results and
Hugging Face ``datasets``. Each reads the rewards the ledger stored; none rescores.

May import: the floors below it (card, ledger, space, policy, loop, replay, environment).

Example:
    >>> sorted(FORMATS)
    ['hf', 'native', 'trl-grpo', 'trl-stepwise', 'verifiers']
"""

from __future__ import annotations

from pathlib import Path

from orchestrator.exports.formats import FORMATS, ExportFormat, write_format
from orchestrator.exports.trajectories import (
    TRAJECTORY_SCHEMA_VERSION,
    completion_text,
    prompt_text,
    trajectory_records,
)
from orchestrator.ledger import Ledger
from vocabulary.domain import SetupError

__all__ = ["FORMATS", "TRAJECTORY_SCHEMA_VERSION", "ExportFormat", "completion_text", "export_campaign",
           "prompt_text", "trajectory_records"]


def export_campaign(ledger: Ledger, campaign_id: str, fmt: str, out_dir: str | Path, *,
                    force: bool = False) -> list[Path]:
    """Write a campaign's rewarded trajectories in ``fmt`` into ``out_dir``; returns the paths written. Files of an
    earlier export there are replaced only with ``force``; links, FIFOs and devices never are (``ledger.outputs``).

    Raises:
        SetupError: an unknown format, or a campaign with no rewarded trajectories (run it, or recompute first).
        OutputPathError: (a ``SetupError``) something at ``out_dir`` or at one of the files may not be replaced.
        LedgerError: the campaign is not in the ledger.
    """
    if fmt not in FORMATS:
        raise SetupError(f"export format {fmt!r} is unknown; use one of {sorted(FORMATS)}")
    records = trajectory_records(ledger, campaign_id)
    if not records:
        raise SetupError(f"campaign {campaign_id!r} has no rewarded trajectories to export; run it for at least one "
                         "iteration (rewards are recorded by the reward node)")
    return write_format(fmt, records, Path(out_dir), ledger=ledger, force=force)
