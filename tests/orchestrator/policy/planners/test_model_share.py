"""The llm arm's share of one-per-slot batches follows its lab track record against bo's anchors."""

from __future__ import annotations

import numpy as np
import pytest

from orchestrator.policy.planners.model_share import model_slots, track_record


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
def test_each_side_keeps_a_slot_and_the_record_moves_the_split(n):
    rng = np.random.default_rng(0)
    prior = [model_slots(n, 0.0, 0.0, rng) for _ in range(400)]
    losing = [model_slots(n, 0.0, 20.0, rng) for _ in range(400)]
    winning = [model_slots(n, 20.0, 0.0, rng) for _ in range(400)]
    assert min(prior + losing + winning) >= 1 and max(prior + losing + winning) <= n - 1
    assert np.mean(prior) == pytest.approx(n / 2, abs=0.35), "a uniform prior: no side favoured before evidence"
    if n == 2:
        assert set(prior + losing + winning) == {1}, "two slots: one each, whatever the record"
    else:
        assert np.mean(losing) < np.mean(prior) < np.mean(winning)
        assert np.mean(losing) < 1.2 and np.mean(winning) > n - 1.2


def test_a_single_slot_goes_to_the_model_as_often_as_its_posterior_says():
    rng = np.random.default_rng(1)
    assert {model_slots(1, 0.0, 0.0, rng) for _ in range(50)} == {0, 1}
    assert np.mean([model_slots(1, 0.0, 30.0, rng) for _ in range(2000)]) < 0.1
    assert model_slots(0, 5.0, 0.0, rng) == 0


def test_the_draw_is_seeded():
    draws = [[model_slots(6, 2.0, 3.0, np.random.default_rng(7)) for _ in range(3)] for _ in range(2)]
    assert draws[0] == draws[1]
