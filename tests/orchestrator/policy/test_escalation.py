import math

import numpy as np
import pandas as pd
import pytest

from orchestrator.loop.campaign import Campaign
from orchestrator.policy.escalation import (
    Belief,
    calibrate_rung,
    decision_threshold,
    expected_value_of_information,
    probability_informative,
    promote_by_value_per_cost,
)
from tests.conftest import FREESOLV_SPEC, small_spec
from vocabulary.events import expand_batches


def test_voi_matches_a_monte_carlo_preposterior():
    belief, noise, threshold = Belief(0.3, 1.2), 0.8, 0.5
    rng = np.random.default_rng(0)
    s = belief.preposterior_sd(noise)
    draws = belief.mean + s * rng.standard_normal(400_000)
    monte_carlo = np.maximum(draws, threshold).mean() - max(belief.mean, threshold)
    assert expected_value_of_information(belief, noise, threshold) == pytest.approx(monte_carlo, abs=3e-3)


def test_voi_grows_with_informativeness_and_uncertainty_and_vanishes_far_from_the_cut():
    b = Belief(0.0, 1.0)
    assert expected_value_of_information(b, 0.1, 0.0) > expected_value_of_information(b, 2.0, 0.0)
    assert expected_value_of_information(Belief(0.0, 2.0), 0.5, 0.0) > expected_value_of_information(b, 0.5, 0.0)
    assert expected_value_of_information(Belief(10.0, 1.0), 0.5, 0.0) < 1e-12
    assert expected_value_of_information(b, 0.5, -math.inf) == 0.0


def test_promotion_is_ranked_per_second_and_capped():
    beliefs = {"cheap": Belief(0.0, 1.0), "dear": Belief(0.0, 1.0), "sure": Belief(9.0, 1.0)}
    ranked = promote_by_value_per_cost(beliefs, {"cheap": 1.0, "dear": 100.0, "sure": 1.0}, 0.5, 0.0,
                                       capacity=1, min_voi=1e-9)
    assert [r[0] for r in ranked][:2] == ["cheap", "dear"]
    assert [r[3] for r in ranked] == [True, False, False]  # capacity 1; "sure" has nothing to learn


def test_threshold_and_calibration():
    assert decision_threshold([5, 4, 3, 2], 2) == 3.5
    assert decision_threshold([5, 4], 2) == -math.inf
    x = np.linspace(0, 1, 20)
    cal = calibrate_rung("r", list(zip(x, 2 * x + 1)))
    assert cal.slope == pytest.approx(2) and cal.intercept == pytest.approx(1) and cal.spearman == pytest.approx(1)
    noise = calibrate_rung("n", list(zip(x, np.random.default_rng(1).permutation(x))))
    assert noise.is_informative(min_pairs=5, min_informativeness=0.3) is None  # 20 pairs cannot rule 0.3 out
    wide = np.linspace(0, 1, 80)
    noise = calibrate_rung("n", list(zip(wide, np.random.default_rng(1).permutation(wide))))
    assert noise.is_informative(min_pairs=5, min_informativeness=0.3) is False
    unproven = calibrate_rung("u", [(0, 0), (1, 2), (2, 1), (3, 4), (4, 3)])  # ρ 0.8 on 5 pairs: p = 0.06
    assert unproven.is_informative(min_pairs=5, min_informativeness=0.3) is None
    assert calibrate_rung("p", list(zip(x, x))).is_informative(min_pairs=5, min_informativeness=0.3) is True
    against = calibrate_rung("a", list(zip(x, -x)))  # a proxy that disagrees is no proxy
    assert against.is_informative(min_pairs=5, min_informativeness=0.3) is False
    assert calibrate_rung("few", [(0, 0), (1, 1)]).is_informative() is None


def test_the_probability_that_a_rung_is_informative_is_the_exact_bayes_factor_and_falls_fast_for_noise():
    """The closed form agrees with the Bayes factor integrated numerically (over the intercept, the positive slope and
    the residual variance), is invariant to the lab's unit and the rung's, and separates noise from a real rung long
    before a test could rule the noise out."""
    from scipy import stats

    x = np.array([0.3, -1.2, 0.8, 1.9, -0.4, 0.1, -0.9])
    y = np.array([1.1, -0.2, 0.4, 2.6, 0.9, 0.2, 0.5])
    spread = 1.1
    # Riemann sums on a grid over the intercept a (flat), the slope m > 0 (half-normal of scale σ / spread) and
    # log σ (Jeffreys' 1/σ² is flat in log σ); the intercept's and σ's steps are shared with H0
    a = np.linspace(-4.0, 5.0, 181)[:, None, None]
    m = np.linspace(0.0, 6.0, 181)[None, 1:, None]
    sigma = np.exp(np.linspace(np.log(0.05), np.log(20.0), 181))[None, None, :]
    residuals = y[:, None, None, None] - (a + m * x[:, None, None, None])
    likelihood = np.exp(stats.norm.logpdf(residuals, 0.0, sigma).sum(axis=0))
    h1 = np.sum(likelihood * 2.0 * stats.norm.pdf(m, 0.0, sigma / spread)) * (m[0, 1, 0] - m[0, 0, 0])
    flat = stats.norm.logpdf(y[:, None, None] - a[:, :, 0][None], 0.0, sigma[0][None]).sum(axis=0)  # (a, σ)
    h0 = np.sum(np.exp(flat))
    assert probability_informative(x, y, spread) == pytest.approx(h1 / (h1 + h0), abs=2e-3)
    assert probability_informative([], [], spread) == 0.5
    assert probability_informative(4.184 * x - 37.5, 10.0 * y + 3.0, 4.184 * spread) == pytest.approx(
        probability_informative(x, y, spread), abs=1e-9)
    rng = np.random.default_rng(3)
    noise = [np.mean([probability_informative(rng.normal(size=n), rng.normal(size=n), 1.0) for _ in range(200)])
             for n in (5, 10, 30)]
    assert noise[0] < 0.45 and noise[2] < noise[1] < noise[0]  # pure noise: doubted at once, more with every pair
    lab = rng.normal(size=15)
    rung = 0.8 * lab + 0.6 * rng.normal(size=15)  # ρ ≈ 0.8
    p = probability_informative(rung, lab, float(np.std(rung)))
    assert p > 0.95 and probability_informative(rung, 3.0 * lab, float(np.std(rung))) > 0.95
    assert probability_informative(-rung, lab, float(np.std(rung))) < 0.1  # a rung that disagrees is no proxy


def test_an_uninformative_rung_is_measured_then_skipped_by_every_arm(tmp_path):
    frame = pd.read_csv(FREESOLV_SPEC.parent / "data" / "FreeSolv_gauche.csv")
    frame["coin"] = np.random.default_rng(0).normal(size=len(frame))
    pool = tmp_path / "pool.csv"
    frame.to_csv(pool, index=False)
    spec = small_spec(lab_experiments=24, planner__control_share=0.5)  # both arms in most batches
    data = spec.model_dump()
    data["space"]["pool"] = str(pool)
    data["ladder"] = [{"name": "coin", "simulator": "table", "column": "coin", "property": "coin", "proxy": "coin",
                       "cost_s": 60.0}]
    from orchestrator.spec import validate_spec

    with Campaign.start(validate_spec(data), db=tmp_path / "coin.db", campaign_id="coin") as campaign:
        campaign.run()
        events = list(expand_batches(campaign.ledger.events("coin")))
    assessed = [e.payload for e in events if e.type == "RungAssessed"]
    judged = [a for a in assessed if a["is_informative"] is not None]
    # judged uninformative at some point (more pairs may later, by chance, put a coin's |ρ| over the bar)
    assert any(a["is_informative"] is False for a in judged)
    skips = [e.payload for e in events if e.type == "Promoted" and e.payload["decision"] == "skip"
             and e.payload["to_rung"] == "coin"]
    assert skips and all("uninformative" in s["reason"] for s in skips)
    judged_at = {a["iteration"]: a["is_informative"] for a in assessed}
    skipped_in = {s["iteration"] for s in skips}
    assert all(judged_at[i - 1] is False for i in skipped_in)
    # the rule is the same for both arms: in an iteration that skips the rung, every valid proposal skips it
    rejected = {(e.payload["iteration"], e.payload["candidate_id"]) for e in events if e.type == "Rejected"}
    valid = {(e.payload["iteration"], e.payload["candidate_id"]) for e in events if e.type == "Proposed"} - rejected
    assert {(s["iteration"], s["candidate_id"]) for s in skips} == {v for v in valid if v[0] in skipped_in}
    arm_of = {(e.payload["iteration"], e.payload["candidate_id"]): e.payload["arm"] for e in events
              if e.type == "Proposed"}
    assert {arm_of[(s["iteration"], s["candidate_id"])] for s in skips} == {"bo", "random"}, "both arms skip it"
    # meanwhile it runs only on the candidates sent to the lab, after the ranking (calibration probes), so its
    # informativeness is still measured (on a handful of pairs a coin's |ρ| can cross the bar again)
    to_lab = {(e.payload["iteration"], e.payload["candidate_id"]) for e in events if e.type == "Promoted"
              and e.payload["to_rung"] == "lab" and e.payload["decision"] == "promote"}
    probes = [e.payload for e in events if e.type == "Simulated" and e.payload["iteration"] in skipped_in]
    assert probes and all((p["iteration"], p["candidate_id"]) in to_lab for p in probes)
    n_pairs = [a["n_pairs"] for a in assessed]
    assert n_pairs[-1] > min(a["n_pairs"] for a in judged), "the estimate keeps being updated"
