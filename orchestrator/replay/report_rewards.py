"""The report's rewards section: each rung's validity against lab outcomes as it was re-estimated, and the rewards
by arm (final and provisional), from the ledger's ``RungsValidated`` (older ledgers: ``RungValidated``) and reward
records.

Example:
    >>> from orchestrator.ledger import Ledger
    >>> ledger = Ledger.open(":memory:")
    >>> rewards_section(ledger, "c1")
    ''
    >>> insert_rewards_section("<body><p>x</p></body>", ledger, "c1")
    '<body><p>x</p></body>'
"""

from __future__ import annotations

import html
import statistics
from collections import defaultdict

from orchestrator.ledger import Ledger
from orchestrator.loop.upcast import records

__all__ = ["insert_rewards_section", "rewards_section", "rung_validity_rows"]


def _fmt(value, digits: int = 3) -> str:
    return "–" if value is None else f"{value:.{digits}g}" if isinstance(value, float) else html.escape(str(value))


def rung_validity_rows(ledger: Ledger, campaign_id: str) -> list[dict]:
    """Per iteration and proxy rung: pairs, Spearman ρ, AUROC, the process weight and what set it, the base rate."""
    events = ledger.events(campaign_id, types=["RungValidated", "RungsValidated"])
    return [p for e in events for _, p in records(e)]


def _reward_rows(ledger: Ledger, campaign_id: str) -> list[tuple[str, int, int, float, float, float]]:
    current: dict[str, tuple[str, dict]] = {}
    for e in ledger.events(campaign_id, types=["RewardEstimated", "RewardFinalised"]):
        if "arm" in e.payload and e.payload["arm"]:
            current[e.payload["subject"]] = (e.type, e.payload)
    by_arm: dict[str, list[tuple[str, dict]]] = defaultdict(list)
    for kind, payload in current.values():
        by_arm[payload["arm"]].append((kind, payload))
    rows = []
    for arm, items in sorted(by_arm.items()):
        payloads = [p for _, p in items]
        rows.append((arm, len(items), sum(k == "RewardFinalised" for k, _ in items),
                     statistics.fmean(p["reward"] for p in payloads),
                     statistics.fmean(p["components"].get("outcome", 0.0) for p in payloads),
                     statistics.fmean(p["components"].get("process", 0.0) for p in payloads)))
    return rows


def rewards_section(ledger: Ledger, campaign_id: str) -> str:
    """HTML for the rewards section, or '' when the campaign recorded no process rewards."""
    validity = rung_validity_rows(ledger, campaign_id)
    rewards = _reward_rows(ledger, campaign_id)
    if not validity and not rewards:
        return ""
    parts = ["<h3>Rewards and calibration</h3>"]
    if rewards:
        head = ("<tr><th>arm</th><th>trajectories</th><th>final</th><th>mean reward</th><th>mean outcome anchor</th>"
                "<th>mean process</th></tr>")
        body = "".join(f"<tr><td>{html.escape(arm)}</td><td>{n}</td><td>{n_final}</td><td>{_fmt(mean)}</td>"
                       f"<td>{_fmt(outcome)}</td><td>{_fmt(process)}</td></tr>"
                       for arm, n, n_final, mean, outcome, process in rewards)
        parts.append("<p>Trajectory rewards in [-1, 1] by arm (current records; provisional until the lab answers)."
                     "</p><table>" + head + body + "</table>")
    if validity:
        head = ("<tr><th>iteration</th><th>rung</th><th>lab pairs</th><th>Spearman ρ</th><th>AUROC</th>"
                "<th>process weight</th><th>set by</th><th>base rate</th></tr>")
        body = "".join(f"<tr><td>{v['iteration']}</td><td>{html.escape(v['rung'])}</td><td>{v['n_pairs']}</td>"
                       f"<td>{_fmt(v['spearman'])}</td><td>{_fmt(v['auroc'])}</td><td>{_fmt(v['weight'])}</td>"
                       f"<td>{html.escape(v['measure'])}</td><td>{_fmt(v['base_rate'])}</td></tr>" for v in validity)
        parts.append("<p>Each proxy rung's validity against lab outcomes, re-estimated as results arrive; it scales "
                     "the rung's share of the process reward.</p><table>" + head + body + "</table>")
    return "\n".join(parts)


def insert_rewards_section(page: str, ledger: Ledger, campaign_id: str) -> str:
    """``page`` with the rewards section placed just before ``</body>`` (unchanged if there is nothing to show)."""
    section = rewards_section(ledger, campaign_id)
    if not section or "</body>" not in page:
        return page
    return page.replace("</body>", section + "\n</body>", 1)
