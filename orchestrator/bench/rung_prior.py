"""The ladder as a prior: each rung calibrated against the lab results so far, the best one as the bo arm's prior mean.

A rung's values are mapped onto the lab's scale by the linear calibration of ``escalation.calibrate_rung`` on the
(rung value, lab value) pairs measured so far: calibrating values, not utilities, keeps a target objective's fold
(``-|value − target|``) out of the fit. The prior utility of a candidate is then the utility of its calibrated rung
value. A rung is used once ``is_informative`` says so (``min_pairs`` pairs and |Spearman ρ| ≥ ``min_informativeness``);
among informative rungs the one with the largest |ρ| wins. Before ``min_pairs`` lab results, the cheapest rung is
taken as it stands (a rung of the bench reports the lab's own property, in its unit): this is escalation's optimistic
prior (``PRIOR_INFORMATIVENESS``), and it only steers half of the initial design (``BOPlanner._initial_design``).
A rung measured to be uninformative gives no prior at all, and the bo arm is then plain BO.

With ``as_values`` the prior is the calibrated rung value itself (objective unit), for a planner that models values.
"""

from __future__ import annotations

import numpy as np

from ..domain import objective_utility
from ..escalation import RungCalibration, calibrate_rung
from ..planners.base import PlanningContext

__all__ = ["RungPrior"]


class RungPrior:
    """A ``PriorMean`` for ``BOPlanner`` from rung columns read over the whole pool.

    Args:
        rung_values: rung name -> value per pool row (NaN where the rung failed), in the lab's unit, cheapest first.
        lab_values: the lab value of every pool row; only the observed rows are ever read.
        direction, target: the objective.
        min_pairs, min_informativeness: when a rung counts as informative (as in ``[screening]``).
        as_values: return prior values (calibrated rung values) rather than their utilities.
        initial_only: give the uncalibrated prior for the initial design only, and None once ``min_pairs`` lab
            results exist (for a planner that reads the rungs as features instead).

    Example:
        >>> import numpy as np
        >>> from types import SimpleNamespace
        >>> rung = np.arange(10.0)
        >>> prior = RungPrior({"cheap": rung}, 2 * rung + 1, "maximize")
        >>> context = SimpleNamespace(observed=np.arange(6))
        >>> np.round(prior(context)[[0, 9]], 6).tolist(), prior.last["rung"]
        ([1.0, 19.0], 'cheap')
    """

    def __init__(self, rung_values: dict[str, np.ndarray], lab_values: np.ndarray, direction: str,
                 target: float | None = None, *, min_pairs: int = 5, min_informativeness: float = 0.3,
                 as_values: bool = False, initial_only: bool = False):
        self.rung_values = {name: np.asarray(v, dtype=float) for name, v in rung_values.items()}
        self.lab_values = np.asarray(lab_values, dtype=float)
        self.direction, self.target = direction, target
        self.min_pairs, self.min_informativeness = min_pairs, min_informativeness
        self.as_values, self.initial_only = as_values, initial_only
        self.last: dict = {}
        """The last decision: chosen rung (or None) and every rung's calibration numbers."""
        self._cache: tuple[bytes, np.ndarray | None] | None = None

    def _utilities(self, values: np.ndarray) -> np.ndarray:
        filled = np.where(np.isfinite(values), values, np.nanmedian(values))  # a failed rung: a middling guess
        if self.as_values:
            return filled
        return np.asarray([objective_utility(self.direction, v, self.target) for v in filled], dtype=float)

    def calibrations(self, observed: np.ndarray) -> dict[str, RungCalibration]:
        out = {}
        for name, values in self.rung_values.items():
            rows = [int(i) for i in observed if np.isfinite(values[int(i)])]
            out[name] = calibrate_rung(name, [(values[i], self.lab_values[i]) for i in rows])
        return out

    def __call__(self, context: PlanningContext) -> np.ndarray | None:
        observed = np.asarray(context.observed, dtype=int)
        key = observed.tobytes()
        if self._cache is not None and self._cache[0] == key:
            return self._cache[1]
        if self.initial_only and len(observed) >= self.min_pairs:
            self.last = {"rung": None, "calibrations": {}}
            self._cache = (key, None)
            return None
        calibrations = self.calibrations(observed)
        informative = {name: c for name, c in calibrations.items()
                       if c.is_informative(min_pairs=self.min_pairs, min_informativeness=self.min_informativeness)}
        prior = None
        chosen = max(informative, key=lambda n: abs(informative[n].spearman)) if informative else None
        if chosen is None and len(observed) < self.min_pairs and self.rung_values:
            cheapest = next(iter(self.rung_values))  # rungs arrive cheapest first
            prior = self._utilities(self.rung_values[cheapest])
            self.last = {"rung": f"{cheapest} (uncalibrated)", "calibrations": {}}
            self._cache = (key, prior)
            return prior
        if chosen is not None:
            c = informative[chosen]
            prior = self._utilities(c.intercept + c.slope * self.rung_values[chosen])
        self.last = {"rung": chosen, "calibrations": {n: c.as_numbers() for n, c in calibrations.items()}}
        self._cache = (key, prior)
        return prior
