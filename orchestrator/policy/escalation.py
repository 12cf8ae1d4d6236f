"""Escalation: which candidates climb to the next rung, which rungs are worth running, and what the ladder says.

The model is a Gaussian multi-fidelity fusion over the rungs. Each candidate starts with a belief about its lab
utility, ``N(mean, sd²)``, from the lab surrogate (or from the lab results so far). A rung with a proxy property is
calibrated against the lab on the pairs seen so far, value on value (``beliefs.rung_calibrations``): ``lab value ≈
intercept + slope · proxy value``, with a residual sd. Running that rung is then a noisy measurement of the lab
utility (the utility of the calibrated value), and fusing it is a precision-weighted update (the linear co-kriging
of Kennedy & O'Hagan, with one scalar per rung).

Promotion weighs the expected value of that information against the rung's cost. The decision the information can
change is whether the candidate is among the ones sent to the lab: if its mean sits far above or below the cut-off
``threshold``, a rung result is unlikely to flip it. For a Gaussian preposterior with sd ``s`` (the sd of the
posterior mean before the rung runs),

    voi = E[max(mean', threshold)] - max(mean, threshold) = s · (φ(z) - |z| · Φ(-|z|)),  z = (mean - threshold) / s

in utility units, and the promotion score is ``voi / cost_s``. A rung whose pairs rule out a rank correlation of
``min_informativeness`` with the lab (``RungCalibration.is_informative``) is skipped (by every arm: the screen treats the main arm and
the control alike).

Every rule here that reads a rung against the lab gives the same answer in any unit of the rung (``a · proxy + b``,
a > 0: kJ or kcal/mol, another zero): the verdicts read ranks, the evidence (``probability_informative``) reads the
correlation and the rung's spread over its pool, and the calibration (``shrunk_calibration``) is shrunk towards a line
fitted on the rung standardised over its pool, so its values in the lab's unit, and hence every belief and promotion,
are the same. A negative scale is a rung that disagrees with the lab: ruled out, and named (``runs_backwards``).

Example:
    >>> calibration = calibrate_rung("gaff", [(0.0, 0.1), (1.0, 1.1), (2.0, 1.9), (3.0, 3.2), (4.0, 3.9)])
    >>> round(calibration.spearman, 2), calibration.is_informative()
    (1.0, True)
    >>> belief = Belief(mean=0.0, sd=1.0)
    >>> fused = belief.fuse(calibration.predict(2.5), calibration.residual_sd)
    >>> round(fused.mean, 1), fused.sd < 0.2  # the calibrated rung dominates a vague prior
    (2.5, True)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import norm, spearmanr
from scipy.stats import t as student_t

__all__ = [
    "Belief",
    "RungCalibration",
    "calibrate_rung",
    "decision_threshold",
    "expected_value_of_information",
    "probability_informative",
    "promote_by_value_per_cost",
    "shrunk_calibration",
]

#: Before a rung has met the lab, assume it is this well rank-correlated with the lab (an optimistic prior, so
#: every rung gets tried and measured).
PRIOR_INFORMATIVENESS = 0.5

#: A rung's rank correlation with the lab counts only when chance would give it less often than this (the usual 5 %).
INFORMATIVE_P = 0.05

#: When the pairs say a rung ranks the lab in reverse (``RungCalibration.runs_backwards``): ρ at most
#: ``-BACKWARDS_SPEARMAN`` over at least ``BACKWARDS_MIN_PAIRS`` pairs. The pairs are the campaign's picks, not a
#: random sample: picks made by the rung and the descriptors together make even a pure-noise rung correlate
#: negatively with the lab among them (Berkson's bias), so a significance test alone misleads. Measured on pure-noise
#: rungs of the rung-quality sweep's five problems (40 seeds each, the bo campaign, 2026-11-29): ρ ≤ −0.3 at one-sided
#: p < 0.05 in 117 of 200 campaigns, this rule in 2 of 200; reversed rungs (pool ρ ≈ −0.89 and −0.7, 10 seeds each)
#: are named in 48 and 35 of 50.
BACKWARDS_SPEARMAN = 0.8
BACKWARDS_MIN_PAIRS = 15


@dataclass(frozen=True)
class Belief:
    """A Gaussian belief about one candidate's lab utility (utility units: higher is better)."""

    mean: float
    sd: float

    def fuse(self, measurement: float, noise_sd: float) -> Belief:
        """Precision-weighted update with a measurement of the lab utility that has sd ``noise_sd``."""
        prior_var, noise_var = max(self.sd, 1e-12) ** 2, max(noise_sd, 1e-12) ** 2
        var = 1.0 / (1.0 / prior_var + 1.0 / noise_var)
        return Belief(mean=var * (self.mean / prior_var + measurement / noise_var), sd=math.sqrt(var))

    def preposterior_sd(self, noise_sd: float) -> float:
        """Sd of the posterior mean before the measurement is made: ``sd² / sqrt(sd² + noise²)``."""
        return self.sd**2 / math.sqrt(self.sd**2 + noise_sd**2)


@dataclass(frozen=True)
class RungCalibration:
    """How a rung's proxy relates to the lab, from the (proxy utility, lab utility) pairs seen so far."""

    rung: str
    n_pairs: int
    spearman: float | None
    intercept: float
    slope: float
    residual_sd: float | None
    p_value: float | None = None
    """One-sided p-value of a positive rank correlation against none (None when it cannot be computed)."""

    def is_informative(self, *, min_pairs: int = 5, min_informativeness: float = 0.3) -> bool | None:
        """True, False, or None while the pairs cannot tell (always None before ``min_pairs`` pairs).

        - True: a positive rank correlation of at least ``min_informativeness`` that chance would rarely give
          (one-sided p < ``INFORMATIVE_P``). A proxy is declared as an estimate of the lab's property, so only
          agreement counts: on a dozen pairs |ρ| ≥ 0.3 happens by chance one time in three, and pairs the screen
          selected on the rung carry a negative correlation by construction (selecting on belief + rung makes the
          two compete among the selected: Berkson's bias).
        - False: the pairs rule ρ ≥ ``min_informativeness`` out (the upper one-sided 95 % bound of ρ, by Fisher's z
          with the Spearman standard error 1.06/√(n−3), is below it).
        - None otherwise: a rung is not called noise on five pairs that merely fail to prove it (GAFF at ρ 0.5 on
          5 pairs); until then it keeps escalation's optimistic prior.
        """
        if self.n_pairs < min_pairs or self.spearman is None:
            return None
        is_significant = self.p_value is None or self.p_value < INFORMATIVE_P
        if self.spearman >= min_informativeness and is_significant:
            return True
        rho = min(max(self.spearman, -0.999999), 0.999999)
        upper = math.atanh(rho) + 1.6449 * 1.06 / math.sqrt(max(self.n_pairs - 3, 1))
        return False if upper < math.atanh(min_informativeness) else None

    def runs_backwards(self) -> bool:
        """Whether the pairs show the rung ranking the lab in reverse, beyond what the campaign's own choice of pairs
        gives a rung that says nothing: ρ ≤ −``BACKWARDS_SPEARMAN`` over at least ``BACKWARDS_MIN_PAIRS`` pairs.
        Such a rung is ruled out long before (``is_informative``), since a proxy estimates the lab's property; the
        user should hear why, as the rung may measure the opposite sense.

        Example:
            >>> RungCalibration("dock", 20, -0.9, 0.0, -1.0, 0.5, p_value=0.999).runs_backwards()
            True
            >>> RungCalibration("dock", 12, -0.9, 0.0, -1.0, 0.5, p_value=0.999).runs_backwards()  # too few pairs
            False
            >>> RungCalibration("noise", 30, -0.6, 0.0, -0.5, 0.5, p_value=0.99).runs_backwards()  # selection can do it
            False
        """
        if self.n_pairs < BACKWARDS_MIN_PAIRS or self.spearman is None:
            return False
        return self.spearman <= -BACKWARDS_SPEARMAN

    def predict(self, proxy_utility: float) -> float:
        """The lab utility this rung's proxy predicts."""
        return self.intercept + self.slope * proxy_utility

    def noise_sd(self, prior_sd: float) -> float:
        """The measurement noise of this rung as a predictor of the lab utility, in utility units.

        With too few pairs for a residual, it is set so that the rung explains ``PRIOR_INFORMATIVENESS²`` of the
        prior variance.
        """
        if self.residual_sd is not None and self.n_pairs >= 5:
            return max(self.residual_sd, 1e-6)
        rho = PRIOR_INFORMATIVENESS
        return prior_sd * math.sqrt((1 - rho**2) / rho**2)

    def as_numbers(self) -> dict[str, float | None]:
        return {"n_pairs": float(self.n_pairs), "spearman": self.spearman, "intercept": self.intercept,
                "slope": self.slope, "residual_sd": self.residual_sd, "p_value": self.p_value}


def _prior_line(x: np.ndarray, y: np.ndarray, spread: float, centre: float) -> tuple[float, float]:
    """(value at ``centre``, slope) of the line the calibration is shrunk towards, in the lab's unit per rung unit.

    The lab regressed on the rung standardised over its pairs, with both scales read from the pairs:
    ``lab ≈ ȳ + r₀ · (s_y / s_x) · (proxy − x̄)`` (``spread``, the rung's sd over the pool, when the pairs show none). The standardised slope ``r₀`` is the pairs'
    correlation (Spearman's ρ read on the Pearson scale by the Gaussian copula, ``2 sin(πρ/6)``, so one extreme pair
    cannot set it), and never below escalation's optimistic prior ``PRIOR_INFORMATIVENESS``: a proxy estimates the
    lab's property, and a handful of pairs the campaign chose at the rung's top carry a correlation that selection
    has shrunk or turned (Berkson's bias); proof that a rung says nothing is ``is_informative``'s to give. Every term
    moves with the rung (a > 0: ``centre``, ``spread`` and the slope per rung unit scale or shift with it), so the
    line in the lab's unit is the same in any unit of the rung. One pair shows no spread of the lab: the rung keeps
    its declared unit (slope 1, as the cold start reads it), through the pair.
    """
    if len(x) == 1:
        return float(y[0] + (centre - x[0])), 1.0
    s_y = float(np.std(y))
    rho = float(spearmanr(x, y).statistic) if np.ptp(x) > 0 and s_y > 0 else math.nan
    r0 = max(2.0 * math.sin(math.pi * rho / 6.0), PRIOR_INFORMATIVENESS) if math.isfinite(rho) else (
        PRIOR_INFORMATIVENESS)
    s_x = float(np.std(x))
    # the lab's and the rung's scales read from the same pairs: the campaign chose them, so both spreads are shrunk
    # alike, and a rung that equals the lab gets the identity (the rung's pool-wide sd would flatten it)
    slope = r0 * s_y / (s_x if s_x > 0 else spread)
    return float(np.mean(y) + slope * (centre - float(np.mean(x)))), slope


def shrunk_calibration(proxy: Sequence[float], lab: Sequence[float], spread: float,
                       centre: float = 0.0) -> tuple[float, float]:
    """(intercept, slope) of ``lab ≈ intercept + slope · proxy``, shrunk towards a line that holds in any unit.

    The prior line (``_prior_line``) is the lab on the rung standardised over the pool, with slope the pairs' rank
    correlation (at least the optimistic ``PRIOR_INFORMATIVENESS``) in the lab's sd, through the pairs' means; its
    weight is one pair's (Kass & Wasserman's unit-information prior): in the rung's centred coordinates, ``lab ≈ a +
    m · (proxy − centre)`` with prior precision diag(1, spread²), in units of the residual variance (a conjugate
    normal-inverse-gamma model, so the posterior mean needs no noise estimate). ``spread`` and ``centre`` are the
    rung's sd and mean over the candidates it has seen. A few pairs cannot swing the line as least squares does;
    many give nearly least squares. The answer in the lab's unit is the same whatever affine unit the rung reports
    in (a positive scale and any offset); no pair gives the rung as it stands (0, 1).

    Example:
        >>> shrunk_calibration([], [], 1.0)
        (0.0, 1.0)
        >>> b, m = shrunk_calibration([0.0, 2.0], [1.0, 3.0], 1.0, centre=1.0)
        >>> round(b, 3), round(m, 3)
        (1.0, 1.0)
        >>> b10, m10 = shrunk_calibration([5.0, 25.0], [1.0, 3.0], 10.0, centre=15.0)  # the same rung, 10x + 5
        >>> round(b10 + m10 * 25.0, 3)  # predicts the same lab value
        3.0
    """
    x0, y = np.asarray(proxy, dtype=float), np.asarray(lab, dtype=float)
    if len(x0) == 0:
        return 0.0, 1.0
    spread = spread if spread > 0 and math.isfinite(spread) else 1.0
    prior_mean = np.array(_prior_line(x0, y, spread, centre))
    x = x0 - centre
    X = np.column_stack([np.ones(len(x)), x])
    prior_precision = np.diag([1.0, spread**2])
    a, m = np.linalg.solve(prior_precision + X.T @ X, prior_precision @ prior_mean + X.T @ y)
    return float(a - m * centre), float(m)


def probability_informative(proxy: Sequence[float], lab: Sequence[float], spread: float | None = None) -> float:
    """P(the lab rises with the rung | the pairs), by the Bayes factor of two linear models at even odds.

    H1: ``lab ≈ a + m · proxy`` with ``m > 0``, a half-normal prior of scale σ/``spread`` on the slope (one pair's
    weight on the scale of the rung over the pool, Kass & Wasserman's unit-information prior; ``spread`` None: over
    its pairs, Zellner's g-prior with g = n), σ the residual sd; H0: ``lab ≈ a``. The intercept is flat and the
    residual variance has Jeffreys' prior, both shared, so the factor is closed form: ``2 · B₁₀ · P(m > 0 | H1)``,
    the two-sided factor of a conjugate slope times the posterior odds of its sign (a Student t). It depends on the
    pairs only through their correlation and the rung's spread relative to its pool, so it is the same in any unit
    of the rung (a positive scale, any offset) and of the lab; a rung in a reversed unit (a negative scale) is a rung
    that disagrees, and loses as noise does. Fewer than 3 distinct pairs give ½. A rung that tracks the lab wins fast
    (its factor grows exponentially in the pairs); pure noise loses about as 1/√n (P ≈ 0.4 on 5 random pairs, 0.33
    on 10, 0.25 on 20), long before a test rules it out (about 35 pairs, ``is_informative``). Pairs all taken at the
    rung's top (a cold start by the rung) carry little of this evidence: their spread is a sliver of the pool's.

    Example:
        >>> probability_informative([], [], 1.0)
        0.5
        >>> x = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
        >>> probability_informative(x, [0.1, 1.2, 1.9, 3.1, 4.0, 5.2], 1.7) > 0.98
        True
        >>> probability_informative(x, [2.0, 3.1, 1.0, 2.9, 1.1, 2.2], 1.7) < 0.3
        True
        >>> kj = [4.184 * v - 37.5 for v in x]  # the same rung in another unit and zero
        >>> abs(probability_informative(kj, [2.0, 3.1, 1.0, 2.9, 1.1, 2.2], 4.184 * 1.7)
        ...     - probability_informative(x, [2.0, 3.1, 1.0, 2.9, 1.1, 2.2], 1.7)) < 1e-9
        True
    """
    x, y = np.asarray(proxy, dtype=float), np.asarray(lab, dtype=float)
    n = len(y)
    if n < 3:
        return 0.5
    xc, yc = x - x.mean(), y - y.mean()
    sxx, sxy, sst = float(xc @ xc), float(xc @ yc), float(yc @ yc)
    if sxx <= 0 or sst <= 0:
        return 0.5
    precision = spread**2 if spread is not None and spread > 0 and math.isfinite(spread) else sxx / n
    residual = max(sst - sxy**2 / (precision + sxx), sst * 1e-15)
    log_two_sided = 0.5 * math.log(precision / (precision + sxx)) + 0.5 * (n - 1) * math.log(sst / residual)
    t_sign = sxy * math.sqrt(n - 1) / math.sqrt((precision + sxx) * residual)
    log_factor = math.log(2.0) + log_two_sided + float(student_t.logcdf(t_sign, n - 1))
    return float(1.0 / (1.0 + math.exp(min(max(-log_factor, -700.0), 700.0))))


def calibrate_rung(rung: str, pairs: Sequence[tuple[float, float]], *, spread: float | None = None,
                   centre: float = 0.0) -> RungCalibration:
    """Fit ``lab ≈ intercept + slope · proxy`` and the rank correlation on (proxy, lab) pairs.

    With ``spread`` (and ``centre``: the rung's sd and mean over the candidates it has seen, in its unit) the line is
    shrunk towards a line that holds in any unit of the rung (``shrunk_calibration``); without, it is least squares.
    Both give the same calibrated values whatever affine unit the rung reports in (a positive scale, any offset).
    With fewer than 3 pairs the correlation is unknown and the line is the shrunk one (on the scale of the pairs
    when ``spread`` is None); with none it is the rung as it stands.
    """
    if len(pairs) < 3:
        if not pairs:
            return RungCalibration(rung, 0, None, 0.0, 1.0, None)
        x, y = np.asarray(pairs, dtype=float).T
        if spread is None:
            spread, centre = float(np.std(x)), float(np.mean(x))
        return RungCalibration(rung, len(pairs), None, *shrunk_calibration(x, y, spread, centre), None)
    x, y = np.asarray(pairs, dtype=float).T
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return RungCalibration(rung, len(pairs), 0.0, float(np.mean(y)), 0.0, float(np.std(y)) or None)
    test = spearmanr(x, y, alternative="greater")
    rho, p_value = float(test.statistic), float(test.pvalue)
    if spread is None:
        slope, intercept = np.polyfit(x, y, 1)
    else:
        intercept, slope = shrunk_calibration(x, y, spread, centre)
    residuals = y - (intercept + slope * x)
    dof = max(len(pairs) - 2, 1)
    return RungCalibration(rung, len(pairs), rho, float(intercept), float(slope),
                           float(math.sqrt(float(residuals @ residuals) / dof)),
                           p_value if math.isfinite(p_value) else None)


def expected_value_of_information(belief: Belief, noise_sd: float, threshold: float) -> float:
    """Expected gain in ``max(mean, threshold)`` from one rung measurement with sd ``noise_sd`` (utility units).

    Example:
        >>> round(expected_value_of_information(Belief(0.0, 1.0), 1.0, 0.0), 4)  # s = 1/sqrt(2), z = 0
        0.2821
        >>> expected_value_of_information(Belief(5.0, 1.0), 1.0, 0.0) < 1e-6  # far above the cut: nothing to learn
        True
    """
    s = belief.preposterior_sd(noise_sd)
    if s <= 0 or not math.isfinite(threshold):
        return 0.0
    z = abs(belief.mean - threshold) / s
    return float(s * (norm.pdf(z) - z * norm.sf(z)))


def decision_threshold(means: Sequence[float], n_slots: int) -> float:
    """The cut-off for the lab: midway between the ``n_slots``-th and the next best mean (−inf if all fit)."""
    ordered = sorted(means, reverse=True)
    if n_slots <= 0:
        return math.inf
    if len(ordered) <= n_slots:
        return -math.inf
    return 0.5 * (ordered[n_slots - 1] + ordered[n_slots])


def promote_by_value_per_cost(
    beliefs: dict[str, Belief],
    costs_s: dict[str, float],
    noise_sd: float,
    threshold: float,
    *,
    capacity: int | None = None,
    min_voi: float = 0.0,
    budget_s: float | None = None,
) -> list[tuple[str, float, float, bool]]:
    """Rank candidates by value of information per second of the next rung and choose who climbs.

    Returns (candidate id, voi, voi per second, is_promoted) in rank order. At most ``capacity`` are promoted, never
    one whose voi is at or below ``min_voi`` (utility units), and the promoted ones cost at most ``budget_s`` in all.
    """
    scored = []
    for cid, belief in beliefs.items():
        voi = expected_value_of_information(belief, noise_sd, threshold)
        scored.append((cid, voi, voi / max(costs_s.get(cid, 0.0), 1e-9)))
    scored.sort(key=lambda row: -row[2])
    out = []
    n_in, spent = 0, 0.0
    for cid, voi, per_s in scored:
        cost = costs_s.get(cid, 0.0)
        is_in = (voi > min_voi and (capacity is None or n_in < capacity)
                 and (budget_s is None or spent + cost <= budget_s))
        if is_in:
            n_in, spent = n_in + 1, spent + cost
        out.append((cid, voi, per_s, is_in))
    return out
