"""The llm arm's share of one-per-slot batches follows its lab track record against bo's anchors."""

from __future__ import annotations

import numpy as np
import pytest

from orchestrator.policy.planners.model_share import (
    is_proven,
    model_slots,
    track_record,
)


def test_a_block_is_one_pseudo_observation_of_the_share_of_pairs_the_model_won():
    # observed out of dispatch order: blocks follow the dispatch seq
    provenance = [("llm", 12, "pick"), ("llm", 10, "anchor"), ("llm", 11, "anchor"), ("llm", 13, "anchor"),
                  ("llm", 21, "pick"), ("llm", 20, "pick"), ("llm", 22, "anchor"), ("llm", 23, "anchor")]
    wins, losses = track_record(provenance, [5.0, 1.0, 5.0, 9.0, 3.0, 7.0, 3.0, 3.0], block=4)
    # block 1 (seqs 10-13): beats 1, ties 5, loses to 9 -> 0.5; block 2 (20-23): 3 ties 3 twice, 7 beats both -> 0.75
    assert (wins, losses) == pytest.approx((1.25, 0.75))
    # one-slot plans of an asynchronous lab: each iteration has one source, blocks of the batch size still pair them
    one_slot = [("llm", seq, "pick" if seq % 2 else "anchor") for seq in range(8)]
    assert track_record(one_slot, [0.0, 1.0] * 4, block=4) == (2.0, 0.0)
    assert track_record(one_slot, [0.0, 1.0] * 4, block=1) == (0.0, 0.0)


def test_fallbacks_other_arms_and_batches_without_both_sources_do_not_count():
    provenance = [("llm", 1, "pick"), ("llm", 2, "fallback"), ("bo", 3, "anchor"), ("llm", -1, "anchor")]
    assert track_record(provenance, [1.0, 9.0, 9.0, 9.0], block=4) == (0.0, 0.0)
    with pytest.raises(ValueError, match="2 provenance entries for 1 lab results"):
        track_record(provenance[:2], [1.0], block=2)


@pytest.mark.parametrize("n", [2, 3, 5, 8])
def test_the_model_explores_one_slot_until_the_lab_proves_it_then_earns_a_thompson_share(n):
    rng = np.random.default_rng(0)
    prior = [model_slots(n, 0.0, 0.0, rng) for _ in range(400)]
    even = [model_slots(n, 10.0, 10.0, rng) for _ in range(400)]
    losing = [model_slots(n, 0.0, 20.0, rng) for _ in range(400)]
    winning = [model_slots(n, 20.0, 0.0, rng) for _ in range(400)]
    assert min(prior + even + losing + winning) >= 1 and max(prior + even + losing + winning) <= n - 1
    assert set(prior + even + losing) == {1}, "bo is the baseline: a model the lab cannot tell from bo explores one slot"
    if n > 2:
        assert np.mean(winning) > n - 1.2, "a model whose picks beat bo's in the lab earns all but one slot"


def test_proof_needs_the_lower_credible_bound_above_one_half():
    assert not is_proven(0.0, 0.0) and not is_proven(3.0, 0.0) and not is_proven(10.0, 5.0)
    assert is_proven(5.0, 0.0) and is_proven(12.0, 4.0)
    assert not is_proven(12.0, 8.0), "60 % wins over 20 batches is not yet 95 % sure"


def test_a_single_slot_explores_at_one_per_batch_until_proven():
    rng = np.random.default_rng(1)
    unproven = np.mean([model_slots(1, 0.0, 0.0, rng, block=5) for _ in range(4000)])
    assert unproven == pytest.approx(1 / 5, abs=0.03), "one-slot plans: the same one slot per batch of five"
    assert np.mean([model_slots(1, 30.0, 0.0, rng, block=5) for _ in range(2000)]) > 0.9
    assert {model_slots(1, 0.0, 0.0, rng, block=1) for _ in range(50)} == {0, 1}, "a batch of one: a coin"
    assert model_slots(0, 5.0, 0.0, rng) == 0


def test_the_draw_is_seeded():
    draws = [[model_slots(6, 2.0, 3.0, np.random.default_rng(7)) for _ in range(3)] for _ in range(2)]
    assert draws[0] == draws[1]
