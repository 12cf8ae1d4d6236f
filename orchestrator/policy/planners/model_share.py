"""How many of a batch's lab slots the llm arm's model fills when no screen weighs its picks: the lab does.

With one proposal per lab slot (no proxy rung for the screen to rank by), nothing checks a model pick before it
costs a lab experiment. The arm then splits its slots between the model and bo's anchors (bo's top picks on the
same state) by the model's **track record**: within each block of ``batch_size`` consecutive lab results of the arm
(a synchronous batch, or an asynchronous run of one-slot plans) that had both, how often a model pick's lab result
beat an anchor's. One block is one pseudo-observation (the share of model-anchor pairs the model won, ties half), so
a big batch does not count as many independent trials. A Beta(1, 1) prior over "a model pick beats bo's" gives the
posterior.

The split is **conservative** (the baseline-first rule of conservative bandits, Wu, Shariff, Lattimore and
Szepesvári, 2016): bo is the baseline the arm must not fall behind, so the model gets more than an exploration
slot only once the lab has shown its picks beat bo's.

- **bo's cold start is bo's alone** (the llm arm gives it every slot, ``LLMPlanner.anchor_count``): the
  conservative rule starts with the baseline, since no lab result has yet banked the slack an exploration spends.
- **Until then, one exploration slot per batch** (``EXPLORE_SLOTS``): enough to build the record, little to lose. A
  model no better than bo's next-best costs at most one slot per batch; one-slot plans give it a slot with
  probability ``1 / batch_size``, the same rate.
- **Once the posterior's lower ``CREDIBILITY`` bound on its win rate is above one half** (the model beats bo's
  picks at 95 % credibility), a seeded Thompson draw of the win rate times the batch sets its share, up to all
  but one slot (bo keeps one, so the comparison goes on). This part is GP-Hedge's portfolio (Hoffman, Brochu and
  de Freitas, 2011) with Thompson sampling over two sources of picks.

Nothing here is tuned to a data set: the prior is uniform, the credibility the usual 95 % and the floors one slot.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import numpy as np
from scipy.stats import beta as beta_distribution

__all__ = ["is_proven", "model_slots", "track_record"]

PRIOR = (1.0, 1.0)
"""Beta prior (wins, losses) of "a model pick's lab result beats an anchor's": uniform."""

CREDIBILITY = 0.95
"""The model earns more than its exploration slot once P(win rate > 1/2 | record) reaches this."""

EXPLORE_SLOTS = 1
"""The model's slots per batch until it has earned more: enough to keep a record."""


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


def is_proven(wins: float, losses: float) -> bool:
    """Whether the lab has shown, at ``CREDIBILITY``, that a model pick beats bo's more often than not.

    Example:
        >>> is_proven(0.0, 0.0), is_proven(3.0, 0.0), is_proven(5.0, 0.0), is_proven(12.0, 4.0)
        (False, False, True, True)
    """
    return float(beta_distribution.ppf(1.0 - CREDIBILITY, PRIOR[0] + wins, PRIOR[1] + losses)) > 0.5


def model_slots(n: int, wins: float, losses: float, rng: np.random.Generator, block: int | None = None) -> int:
    """The model's slots of ``n``: its exploration slot until the lab proves it, then a Thompson share.

    Args:
        n: lab slots to fill now.
        wins, losses: the model's track record (``track_record``).
        rng: the seeded draw.
        block: lab results per batch (the batch size; default ``n``): one-slot plans give the model the slot with
            probability ``EXPLORE_SLOTS / block`` while it is unproven.

    Example:
        >>> rng = np.random.default_rng(0)
        >>> [model_slots(5, 0.0, 0.0, rng) for _ in range(3)], [model_slots(5, 40.0, 0.0, rng) for _ in range(3)]
        ([1, 1, 1], [4, 4, 4])
    """
    if n <= 0:
        return 0
    block = max(int(block or n), 1)
    if not is_proven(wins, losses):
        if n == 1:
            return int(rng.random() < EXPLORE_SLOTS / max(block, 2))
        return min(EXPLORE_SLOTS, n - 1)
    p = float(rng.beta(PRIOR[0] + wins, PRIOR[1] + losses))
    if n == 1:
        return int(rng.random() < p)
    return int(min(max(round(p * n), EXPLORE_SLOTS), n - 1))
