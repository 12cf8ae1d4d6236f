"""The surrogate's kernel by rule (``choose_kernel``: ``auto`` reads the pool's columns) and one fit of the campaign's
GP with a named kernel (``fit_surrogate_state``), below ``bo`` and ``kernel_evidence``, which both use them.
``bo`` re-exports every name here.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

from orchestrator.policy.planners.gp_kernels import DISTANCE_KERNELS
from vocabulary.domain import SetupError

__all__ = ["FittedOn", "choose_kernel", "continuous_columns", "fit_surrogate_state"]


def choose_kernel(kind: str, requested: str, features=None, feature_kinds=None) -> str:
    """The surrogate's kernel: ``requested`` (``evidence``: chosen at each refit on the lab data,
    ``kernel_evidence``), or for ``auto``:

    - Tanimoto on molecular fingerprints, and on a feature matrix of 0/1 bits only (a conditions pool's Morgan bits
      and one-hot codes);
    - Tanimoto × Matérn-5/2 (``tanimoto_matern52``) on a conditions pool whose columns hold molecules (SMILES) and
      numbers (``feature_kinds``, ``features.featurise_columns``): a set similarity for the molecules, a lengthscale
      for each number. Matérn-5/2 alone over a thousand fingerprint bits and a temperature spreads its lengthscales
      over the bits and learns little from a few dozen results (orchestrator/policy/planners/DECISIONS.md);
    - Matérn-5/2 otherwise (numbers, compositions, a pool streamed in chunks).

    ``features`` is the whole pool's matrix: a subset of rows can look like bits when a number column takes only its
    two extremes there.

    Example:
        >>> choose_kernel("conditions", "auto", np.array([[0.0, 1.0], [1.0, 0.0]]))
        'tanimoto'
        >>> choose_kernel("conditions", "auto", np.array([[0.0, 0.5], [1.0, 0.0]])), choose_kernel("molecule", "auto")
        ('matern52', 'tanimoto')
        >>> choose_kernel("conditions", "auto", np.array([[0.0, 0.5], [1.0, 0.0]]), np.array(["smiles", "numeric"]))
        'tanimoto_matern52'
    """
    if requested == "tanimoto_matern52":
        _check_product_kernel(feature_kinds)
    if requested != "auto":
        return requested
    if kind == "molecule":
        return "tanimoto"
    if feature_kinds is not None and "smiles" in set(feature_kinds) and len(continuous_columns(feature_kinds)):
        return "tanimoto_matern52"
    if isinstance(features, np.ndarray) and features.size > 0 and bool(np.all((features == 0) | (features == 1))):
        return "tanimoto"
    return "matern52"


def _check_product_kernel(feature_kinds) -> None:
    """Refuse ``kernel = "tanimoto_matern52"`` on a pool it cannot split: it needs the pool's columns read by kind
    (a conditions pool, not streamed), with at least one column of bits (SMILES or categories) and one of numbers."""
    kinds = [] if feature_kinds is None else list(feature_kinds)
    bits = [k for k in kinds if k in ("smiles", "categorical")]
    if not kinds or not bits or not continuous_columns(kinds):
        found = ", ".join(sorted(set(kinds))) or "no columns read by kind (a molecule pool, or one streamed in chunks)"
        raise SetupError(f"[planner] kernel = 'tanimoto_matern52' needs a conditions pool whose columns hold bits "
                         f"(SMILES or categories) and numbers; this pool has {found}. Use kernel = 'auto', which "
                         "chooses by the pool's columns")


def continuous_columns(feature_kinds, n_features: int | None = None) -> list[int]:
    """The features a ``tanimoto_matern52`` kernel scales (numbers and compositions), and any column past the pool's
    own (``n_features``: a rung appended as an input is a number).

    Example:
        >>> continuous_columns(np.array(["smiles", "numeric", "categorical", "formula"]), 5)
        [1, 3, 4]
    """
    kinds = list(feature_kinds)
    own = [i for i, kind in enumerate(kinds) if kind in ("numeric", "formula")]
    return own + list(range(len(kinds), n_features or len(kinds)))


FittedOn = Literal["utility", "value"]


def fit_surrogate_state(X: np.ndarray, y: np.ndarray, *, kernel: str, seed: int,
                        fitted_on: FittedOn = "utility", continuous: list[int] | None = None) -> dict[str, Any]:
    """Fit the GP on lab data (features ``X``, targets ``y``) and return its JSON-serialisable hyperparameters.

    The hyperparameters are the MAP under BoTorch's default priors (``GPSurrogate.fit(priors=True)``), found by
    L-BFGS; Matérn-5/2 and RBF get one lengthscale per feature (ARD). Measured on the discovery benchmarks against the plain
    marginal-likelihood fit with one lengthscale (``orchestrator/DECISIONS.md``). ``fitted_on`` says whether ``y``
    are utilities or values (objective unit); it is stored in the state, since the state's output standardisation
    only fits the same kind of numbers. ``continuous``: the Matérn factor's columns of ``tanimoto_matern52``.
    """
    from orchestrator.policy.planners.surrogate import GPSurrogate

    state = GPSurrogate.fit(X, y, kernel=kernel, seed=seed, ard=kernel in DISTANCE_KERNELS, priors=True,
                            optimizer="lbfgs", continuous=continuous).hyperparameters
    return {**state, "fitted_on": fitted_on}
