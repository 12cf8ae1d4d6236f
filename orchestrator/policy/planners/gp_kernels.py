"""The GP surrogate's kernels on ``pyro.contrib.gp``: pyro's Matern52 with cached squared distances (one shared
lengthscale, or one per feature), and a Tanimoto kernel for fingerprints (pyro has none).

The classes are defined on first use (``kernel_classes``), so importing this module does not import torch or pyro.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from vocabulary.domain import SetupError, import_optional

if TYPE_CHECKING:
    import torch

__all__ = ["KernelName", "freeze", "kernel_classes", "make_kernel", "require_torch_pyro"]

KernelName = Literal["matern52", "tanimoto"]


def require_torch_pyro() -> tuple[Any, Any, Any]:
    """Import torch, pyro and pyro.contrib.gp, or raise a SetupError with the install hint."""
    torch = import_optional("torch", "bayes", "the bo planner")
    pyro = import_optional("pyro", "bayes", "the bo planner")
    gp = import_optional("pyro.contrib.gp", "bayes", "the bo planner")
    return torch, pyro, gp


_KERNEL_CLASSES: dict[str, type] = {}


def kernel_classes() -> dict[str, type]:
    """Define the kernel classes on first use, so that defining them does not import pyro at module import."""
    if _KERNEL_CLASSES:
        return _KERNEL_CLASSES
    torch, _, gp = require_torch_pyro()
    from torch.distributions import constraints

    def cached(module, name: str, X, Z, compute):
        # The parameter-free part of a kernel is computed once per (X, Z) pair of tensors, so a training step
        # costs a Cholesky rather than an (n × n × n_features) product. Identity, not equality: tensors are
        # never modified in place here, and the cache holds X and Z alive so their ids cannot be reused.
        entry = module.__dict__.get(name)
        if entry is not None and entry[0] is X and entry[1] is Z:
            return entry[2]
        value = compute(X, Z)
        module.__dict__[name] = (X, Z, value)
        return value

    def slice_input(kernel, X):
        # pyro copies X through fancy indexing even when every column is active; a 4000 × 1024 pool makes that
        # the dominant cost of batch selection.
        if X.dim() == 2 and X.size(1) == kernel.input_dim and kernel.active_dims == list(range(kernel.input_dim)):
            return X
        return gp.kernels.Kernel._slice_input(kernel, X)

    class Matern52(gp.kernels.Matern52):
        """pyro's Matern52 with cached squared distances for a scalar lengthscale, or one lengthscale per feature."""

        _slice_input = slice_input

        def forward(self, X, Z=None, diag=False):
            if diag:
                return self._diag(X)
            return self.covariance(X, Z, variance=self.variance, lengthscale=self.lengthscale)

        def covariance(self, X, Z=None, *, variance, lengthscale):
            """pyro's Matérn-5/2 formula with the (constrained) hyperparameters passed in, so that a fit can
            evaluate it on its raw parameters without pyro's per-access parameter machinery."""
            r2 = self._square_scaled_dist_by(X, Z, lengthscale)
            sqrt5_r = 5**0.5 * (r2 + 1e-12).sqrt()  # pyro's _torch_sqrt: no NaN gradient at 0
            return variance * (1 + sqrt5_r + (5 / 3) * r2) * torch.exp(-sqrt5_r)

        def _square_scaled_dist(self, X, Z=None):
            return self._square_scaled_dist_by(X, Z, self.lengthscale)

        def _square_scaled_dist_by(self, X, Z, lengthscale):
            if lengthscale.dim() == 0:
                return cached(self, "_cached_square_dist", X, Z, self._sliced_square_dist) / lengthscale**2
            # ARD: one lengthscale per feature, so the inputs are scaled before the distance (nothing to cache).
            A = self._slice_input(X) / lengthscale
            return self._square_dist(A, None if Z is None else self._slice_input(Z) / lengthscale)

        def _sliced_square_dist(self, X, Z):
            return self._square_dist(self._slice_input(X), None if Z is None else self._slice_input(Z))

        def _square_dist(self, X, Z):
            A = X
            B = A if Z is None else Z
            if A.size(1) != B.size(1):
                raise ValueError("Inputs must have the same number of features.")
            squared = (A * A).sum(1, keepdim=True) - 2 * A.matmul(B.t()) + (B * B).sum(1, keepdim=True).t()
            return squared.clamp(min=0)

    class Tanimoto(gp.kernels.Kernel):
        r"""Tanimoto (Jaccard) kernel for non-negative features such as fingerprints.

        ``k(x, z) = variance * <x, z> / (|x|^2 + |z|^2 - <x, z>)``, taken as ``variance`` when both are zero.
        """

        def __init__(self, input_dim: int, variance: torch.Tensor | None = None, active_dims=None):
            super().__init__(input_dim, active_dims)
            variance = torch.tensor(1.0) if variance is None else variance
            self.variance = gp.parameterized.PyroParam(variance, constraints.positive)

        _slice_input = slice_input

        def forward(self, X, Z=None, diag=False):
            if diag:
                return self.variance.expand(X.size(0))
            return self.covariance(X, Z, variance=self.variance)

        def covariance(self, X, Z=None, *, variance):
            """The kernel with its (constrained) variance passed in, as ``Matern52.covariance``."""
            return variance * cached(self, "_cached_similarity", X, Z, self._similarity)

        def _similarity(self, X, Z):
            A = self._slice_input(X)
            B = A if Z is None else self._slice_input(Z)
            if A.size(1) != B.size(1):
                raise ValueError("Inputs must have the same number of features.")
            ab = A.matmul(B.t())
            denominator = (A * A).sum(1, keepdim=True) + (B * B).sum(1, keepdim=True).t() - ab
            is_empty = denominator <= 0  # two all-zero rows count as identical
            return torch.where(is_empty, torch.ones_like(ab), ab / torch.where(is_empty, 1.0, denominator))

    _KERNEL_CLASSES.update(matern52=Matern52, tanimoto=Tanimoto)
    return _KERNEL_CLASSES


def make_kernel(kernel: KernelName, n_features: int, variance: float, lengthscale: float | None):
    torch, _, _ = require_torch_pyro()
    variance_t = torch.tensor(variance, dtype=torch.float64)
    if kernel == "matern52":
        lengthscale_t = torch.tensor(lengthscale, dtype=torch.float64)
        return kernel_classes()["matern52"](input_dim=n_features, variance=variance_t, lengthscale=lengthscale_t)
    if kernel == "tanimoto":
        return kernel_classes()["tanimoto"](input_dim=n_features, variance=variance_t)
    raise SetupError(f"{kernel=} is not a known surrogate kernel; use 'matern52' or 'tanimoto'")


def freeze(module, name: str, value: float) -> None:
    """Replace a PyroParam by a plain float64 tensor, so the value is used exactly (no constraint transform)."""
    import torch

    delattr(module, name)
    setattr(module, name, torch.tensor(value, dtype=torch.float64))
