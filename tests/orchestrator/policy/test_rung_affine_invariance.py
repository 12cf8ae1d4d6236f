"""Every ladder rule that reads a rung against the lab gives the same answer whatever unit the rung reports in.

A rung ``v`` and the same rung as ``a · v + b`` (a > 0: another unit, another zero, such as kJ against kcal/mol) must
lead to the same P(informative) and batch share, the same verdicts (informative, backwards), the same calibrated
prior mean in the lab's unit (so the same ranking), and the same promotions in the screen. A reversed rung (a < 0)
is a rung that disagrees with the lab: ruled out, named backwards, and given no share.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from orchestrator.policy.escalation import (
    Belief,
    calibrate_rung,
    decision_threshold,
    probability_informative,
    promote_by_value_per_cost,
)
from orchestrator.policy.planners.bo import rung_share
from orchestrator.policy.planners.ladder_prior import (
    choose_prior,
    prior_rows,
    surrogate_features,
)

MAPS = [(a, b) for a in (0.1, 10.0, 4.184) for b in (0.0, 100.0, -37.5)]


def _spec(direction: str = "maximize", target: float | None = None):
    return SimpleNamespace(objective=SimpleNamespace(direction=direction, target=target),
                           screening=SimpleNamespace(min_pairs=5, min_informativeness=0.3))


@pytest.fixture(scope="module")
def lab_and_rungs():
    """A pool of 300 with a lab property in kcal/mol, three rungs in the lab's unit (near-perfect, weak, noise), and
    10 lab results."""
    rng = np.random.default_rng(7)
    lab = rng.normal(-5.0, 2.0, size=300)
    rungs = {"informative": lab + rng.normal(0.0, 0.2, size=300),
             "weak": lab + rng.normal(0.0, 3.0, size=300),
             "noise": rng.normal(-5.0, 2.0, size=300)}
    observed = np.sort(np.random.default_rng(11).choice(300, size=10, replace=False))  # pairs at ρ 0.96, 0.59, −0.08
    return lab, rungs, observed


def _calibration(values: np.ndarray, observed: np.ndarray, lab: np.ndarray, name: str = "r"):
    """A surveyed rung's calibration as the loop makes it (``beliefs.rung_calibrations``): on the scale of the rung
    over the pool."""
    return calibrate_rung(name, list(zip(values[observed], lab[observed], strict=True)),
                          spread=float(np.std(values)), centre=float(np.mean(values)))


def _decisions(rungs: dict[str, np.ndarray], observed: np.ndarray, lab: np.ndarray) -> dict:
    """Every ladder decision that reads the rungs against the lab, in the lab's unit."""
    out: dict = {}
    untested = np.setdiff1d(np.arange(len(lab)), observed)[:12]
    for name, values in rungs.items():
        calibration = _calibration(values, observed, lab, name)
        evidence = probability_informative(values[observed], lab[observed], float(np.std(values)))
        prior_sd = float(np.std(lab[observed]))
        beliefs = {str(i): Belief(float(np.mean(lab[observed])), prior_sd).fuse(
            calibration.predict(float(values[i])), calibration.noise_sd(prior_sd)) for i in untested}
        threshold = decision_threshold([b.mean for b in beliefs.values()], 3)
        ranked = promote_by_value_per_cost(beliefs, {c: 1.0 for c in beliefs}, calibration.noise_sd(prior_sd),
                                           threshold, capacity=4)
        out[name] = {
            "evidence": evidence, "share": rung_share(evidence),
            "spearman": calibration.spearman, "p_value": calibration.p_value,
            "is_informative": calibration.is_informative(min_pairs=5, min_informativeness=0.3),
            "runs_backwards": calibration.runs_backwards(), "residual_sd": calibration.residual_sd,
            "noise_sd": calibration.noise_sd(prior_sd),
            "predicted": np.array([calibration.predict(float(v)) for v in values]),
            # who climbs, and each one's value of information (two candidates either side of the cut tie exactly)
            "promoted": {cid: is_in for cid, _, _, is_in in ranked},
            "voi": np.array([voi for _, voi, _, _ in sorted(ranked)]),
            "as_it_stands": np.argsort(-values, kind="stable"),  # the cold start, the rung's share, cheap-first
        }
    for direction, target in (("maximize", None), ("minimize", None), ("target", -6.0)):
        spec = _spec(direction, target)
        for n in (3, 10):  # before min_pairs (the rung as it stands, corrected by each pair) and after
            prior = choose_prior(rungs, observed[:n], lab[observed[:n]], spec)
            rows = prior_rows(prior, rungs, spec, fitted_on="value")
            feature = choose_prior(rungs, observed[:n], lab[observed[:n]], spec, form="feature")
            column = surrogate_features(np.zeros((len(lab), 1)), feature, rungs)[:, -1]
            out[(direction, n)] = {"rung": prior["rung"], "is_calibrated": prior["is_calibrated"],
                                   "evidence": prior["evidence"], "share": rung_share(prior["evidence"]),
                                   "values": rows, "ranking": np.argsort(-rows, kind="stable"),
                                   "feature": column}
    return out


def _assert_same(mapped: dict, base: dict, where: str = "") -> None:
    for key, expected in base.items():
        got, label = mapped[key], f"{where}{key}"
        if isinstance(expected, dict):
            _assert_same(got, expected, f"{label}.")
        elif isinstance(expected, np.ndarray) and expected.dtype.kind == "f":
            np.testing.assert_allclose(got, expected, rtol=1e-7, atol=1e-7, err_msg=label)
        elif isinstance(expected, np.ndarray):
            np.testing.assert_array_equal(got, expected, err_msg=label)
        elif isinstance(expected, float):
            assert got == pytest.approx(expected, rel=1e-7, abs=1e-9), label
        else:
            assert got == expected, label


@pytest.mark.parametrize(("a", "b"), MAPS)
def test_every_ladder_decision_is_the_same_in_any_unit_of_the_rung(lab_and_rungs, a, b):
    lab, rungs, observed = lab_and_rungs
    base = _decisions(rungs, observed, lab)
    mapped = _decisions({name: a * values + b for name, values in rungs.items()}, observed, lab)
    _assert_same(mapped, base)


def test_the_fixed_pairs_cover_each_kind_of_rung(lab_and_rungs):
    """The rungs the invariance test maps are what they are named: the near-perfect rung keeps its share and is the
    prior, the noise rung loses its share."""
    lab, rungs, observed = lab_and_rungs
    base = _decisions(rungs, observed, lab)
    assert base["informative"]["evidence"] > 0.99 and base["informative"]["share"] == 0.5
    assert base["informative"]["is_informative"] is True
    assert base["noise"]["evidence"] < 0.5 and base["noise"]["share"] == 0.0
    assert 0.0 < base["weak"]["evidence"] < 1.0
    assert base[("maximize", 10)]["rung"] == "informative" and base[("maximize", 10)]["is_calibrated"]
    prior = base[("maximize", 10)]["values"]
    assert np.corrcoef(prior, lab)[0, 1] > 0.99 and np.max(np.abs(prior - lab)) < 1.5  # in the lab's unit


@pytest.mark.parametrize("a", [4.184, 10.0, 0.1])
def test_a_near_perfect_rung_in_another_unit_keeps_its_share_on_every_draw(a):
    """The finding of issue 45: at 10 pairs, a near-perfect rung reported 4-10x the lab's numbers (kJ against
    kcal/mol) lost its share of the batch on most draws."""
    rng = np.random.default_rng(11)
    for _ in range(20):
        lab = rng.normal(-5.0, 2.0, size=200)
        rung = lab + rng.normal(0.0, 0.1, size=200)
        observed = rng.choice(200, size=10, replace=False)
        for values in (rung, a * rung + 12.0):
            evidence = probability_informative(values[observed], lab[observed], float(np.std(values)))
            assert rung_share(evidence) == 0.5, (a, evidence)


@pytest.mark.parametrize(("a", "b"), [(-1.0, 0.0), (-4.184, 100.0), (-0.1, -37.5)])
def test_a_rung_in_a_reversed_unit_is_a_reversed_rung(a, b):
    """A negative scale reads as a rung that runs backwards: ruled out, named, given no share, never the prior."""
    rng = np.random.default_rng(5)
    lab = rng.normal(-5.0, 2.0, size=300)
    rung = lab + rng.normal(0.0, 0.2, size=300)
    observed = rng.choice(300, size=20, replace=False)
    reversed_rung = a * rung + b
    same, backwards = (_calibration(values, observed, lab) for values in (rung, reversed_rung))
    assert backwards.spearman == pytest.approx(-same.spearman)
    assert same.is_informative() is True and not same.runs_backwards()
    assert backwards.is_informative() is False and backwards.runs_backwards()
    evidence = probability_informative(reversed_rung[observed], lab[observed], float(np.std(reversed_rung)))
    assert evidence < 0.1 and rung_share(evidence) == 0.0
    assert choose_prior({"reversed": reversed_rung}, observed, lab[observed], _spec()) is None


def test_one_pair_reads_the_rung_in_its_declared_unit_and_any_zero():
    """One lab result says nothing about the lab's spread, so the rung keeps its declared unit (slope 1, as the cold
    start reads it), anchored at the pair: an offset of the rung changes nothing."""
    values = np.array([1.0, 2.0, 4.0, 7.0])
    lab = np.array([np.nan, 11.0, np.nan, np.nan])  # one lab result, at the second candidate
    for b in (0.0, 100.0, -37.5):
        calibration = _calibration(values + b, np.array([1]), lab)
        assert calibration.slope == pytest.approx(1.0)
        assert calibration.predict(2.0 + b) == pytest.approx(11.0)
        assert calibration.predict(7.0 + b) == pytest.approx(16.0)
    none = calibrate_rung("r", [])
    assert (none.intercept, none.slope) == (0.0, 1.0)  # no pair: the rung as it stands
    assert math.isclose(probability_informative([], [], 1.0), 0.5)
