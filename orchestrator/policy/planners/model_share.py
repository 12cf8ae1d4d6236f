"""How many of a batch's lab slots the llm arm's model fills when no screen weighs its picks: the lab does.

With one proposal per lab slot (no proxy rung for the screen to rank by), nothing checks a model pick before it
costs a lab experiment. The arm then splits its slots between the model and bo's anchors (bo's top picks on the
same state) by the model's **track record**: within each block of ``batch_size`` consecutive lab results of the arm
(a synchronous batch, or an asynchronous run of one-slot plans) that had both, how often a model pick's lab result
beat an anchor's. One block is one pseudo-observation (the share of model-anchor pairs the model won, ties half), so
a big batch does not count as many independent trials. A Beta(1, 1) prior over "a model pick beats
bo's" gives the posterior; one seeded Thompson draw from it sets the model's share of this batch's slots.

- The model always keeps at least one slot of two or more (it can earn trust back) and bo at least one (the
  comparison goes on). A model no better than bo's next-best therefore costs at most about one slot per batch.
- A model that beats bo's picks in the lab earns up to all but one slot. Nothing here is tuned to a data set: the
  prior is uniform and the floors are one slot each.

This is the portfolio idea of GP-Hedge (Hoffman, Brochu and de Freitas, 2011) with Thompson sampling in place of
Hedge, applied to two sources of picks instead of acquisition functions.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import numpy as np

__all__ = ["model_slots", "track_record"]

PRIOR = (1.0, 1.0)
"""Beta prior (wins, losses) of "a model pick's lab result beats an anchor's": uniform."""


def track_record(provenance: Sequence[tuple[str, int, str]], utilities: Sequence[float],
                 block: int) -> tuple[float, float]:
    """(wins, losses) of model picks against anchors: one pseudo-observation per block with both.

    A block is ``block`` consecutive lab results of one arm in dispatch order (the batch size): a synchronous
    campaign's batch, or an asynchronous campaign's run of one-slot plans made on nearly the same state.

    Args:
        provenance: per lab result, (arm, dispatch seq, source) with source ``"pick"`` (the arm's own),
            ``"anchor"`` (bo's pick for an llm arm's slot) or ``"fallback"`` (ignored); a negative seq (an imported
            result) is ignored.
        utilities: the lab results' utilities (higher is better), in the same order.
        block: lab results per block, at least 1.

    Example:
        >>> track_record([("llm", 4, "pick"), ("llm", 2, "anchor"), ("llm", 3, "anchor"), ("bo", 1, "pick")],
        ...              [3.0, 1.0, 5.0, 9.0], block=4)
        (0.5, 0.5)
    """
    if len(provenance) != len(utilities):
        raise ValueError(f"{len(provenance)} provenance entries for {len(utilities)} lab results")
    by_arm: dict[str, list[tuple[int, str, float]]] = defaultdict(list)
    for (arm, seq, source), utility in zip(provenance, utilities, strict=True):
        if seq >= 0 and source in ("pick", "anchor"):
            by_arm[arm].append((seq, source, float(utility)))
    wins = losses = 0.0
    for results in by_arm.values():
        results.sort()
        for start in range(0, len(results), max(int(block), 1)):
            chunk = results[start:start + max(int(block), 1)]
            picks = np.asarray([u for _, source, u in chunk if source == "pick"])
            anchors = np.asarray([u for _, source, u in chunk if source == "anchor"])
            if picks.size and anchors.size:
                share = float(((picks[:, None] > anchors[None, :]) + 0.5 * (picks[:, None] == anchors[None, :])).mean())
                wins, losses = wins + share, losses + 1.0 - share
    return wins, losses


def model_slots(n: int, wins: float, losses: float, rng: np.random.Generator) -> int:
    """The model's slots of ``n``: a Thompson draw of its win rate times ``n``, rounded, at least one for each side.

    Example:
        >>> rng = np.random.default_rng(0)
        >>> [model_slots(5, 0.0, 40.0, rng) for _ in range(3)], [model_slots(5, 40.0, 0.0, rng) for _ in range(3)]
        ([1, 1, 1], [4, 4, 4])
    """
    p = float(rng.beta(PRIOR[0] + wins, PRIOR[1] + losses))
    if n <= 1:
        return int(n == 1 and rng.random() < p)
    return int(min(max(round(p * n), 1), n - 1))
