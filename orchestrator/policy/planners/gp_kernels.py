"""The GP surrogate's kernels on ``pyro.contrib.gp``: pyro's Matern52 with cached squared distances (one shared
lengthscale, or one per feature), the squared-exponential (``rbf``) on the same distances, a Tanimoto kernel for
fingerprints (pyro has none), and their product for a pool of molecules and numbers (Tanimoto on the bits times
Matérn-5/2 on the numbers, as GAUCHE and BoTorch's mixed models combine kernels over groups of inputs).

The classes are defined on first use (``kernel_classes``), so importing this module does not import torch or pyro.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from vocabulary.domain import SetupError, import_optional

if TYPE_CHECKING:
    import torch

__all__ = ["DISTANCE_KERNELS", "KERNEL_NAMES", "SCALED_KERNELS", "KernelName", "freeze", "kernel_classes", "make_kernel", "require_torch_pyro"]

KernelName = Literal["matern52", "rbf", "tanimoto", "tanimoto_matern52"]
KERNEL_NAMES = ("matern52", "rbf", "tanimoto", "tanimoto_matern52")
"""Kernels with lengthscales: ``matern52``, ``rbf`` and ``tanimoto_matern52`` (one per continuous feature)."""
SCALED_KERNELS = ("matern52", "rbf", "tanimoto_matern52")
"""Kernels on distances alone (no bits): any real features, one lengthscale per feature with ARD."""
DISTANCE_KERNELS = ("matern52", "rbf")


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

    def tanimoto_similarity(A, B=None):
        B = A if B is None else B
        if A.size(1) != B.size(1):
            raise ValueError("Inputs must have the same number of features.")
        ab = A.matmul(B.t())
        denominator = (A * A).sum(1, keepdim=True) + (B * B).sum(1, keepdim=True).t() - ab
        is_empty = denominator <= 0  # two all-zero rows count as identical
        return torch.where(is_empty, torch.ones_like(ab), ab / torch.where(is_empty, 1.0, denominator))

    def matern52_unit(A, B, lengthscale):
        """Matérn-5/2 of unit variance, one lengthscale per column."""
        A = A / lengthscale
        B = A if B is None else B / lengthscale
        r2 = ((A * A).sum(1, keepdim=True) - 2 * A.matmul(B.t()) + (B * B).sum(1, keepdim=True).t()).clamp(min=0)
        sqrt5_r = 5**0.5 * (r2 + 1e-12).sqrt()
        return (1 + sqrt5_r + (5 / 3) * r2) * torch.exp(-sqrt5_r)

    class Matern52(gp.kernels.Matern52):
        """pyro's Matern52 with cached squared distances for a scalar lengthscale, or one lengthscale per feature."""

        shape = "matern52"  # read by the closed-form fit (``gp_gradients``)
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

    class RBF(Matern52):
        """The squared-exponential kernel ``variance · exp(-r² / 2)`` on Matern52's cached (or ARD-scaled) squared
        distances, as pyro's RBF computes it."""

        shape = "rbf"  # read by the closed-form fit (``gp_gradients``)

        def covariance(self, X, Z=None, *, variance, lengthscale):
            return variance * torch.exp(-0.5 * self._square_scaled_dist_by(X, Z, lengthscale))

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
            return tanimoto_similarity(self._slice_input(X), None if Z is None else self._slice_input(Z))

    class TanimotoMatern52(gp.kernels.Kernel):
        r"""Tanimoto on the bit features times a unit-variance Matérn-5/2 on the continuous ones (one lengthscale
        each): ``k(x, z) = variance · S(x_bits, z_bits) · M(x_cont, z_cont)``. Two rows are alike only when their
        molecules are alike and their conditions are near; a product of kernels is a kernel.

        ``continuous``: the column indices that go to the Matérn factor; every other column is a bit.
        """

        def __init__(self, input_dim: int, continuous: list[int], variance=None, lengthscale=None):
            super().__init__(input_dim)
            self.continuous = [int(i) for i in continuous]
            self.bits = [i for i in range(input_dim) if i not in set(self.continuous)]
            variance = torch.tensor(1.0) if variance is None else variance
            lengthscale = torch.ones(len(self.continuous)) if lengthscale is None else lengthscale
            self.variance = gp.parameterized.PyroParam(variance, constraints.positive)
            self.lengthscale = gp.parameterized.PyroParam(lengthscale, constraints.positive)

        @property
        def n_scaled(self) -> int:
            """How many features have a lengthscale (the prior's dimension)."""
            return len(self.continuous)

        def split(self, X):
            """(bit columns, continuous columns) of ``X``."""
            return X[:, self.bits], X[:, self.continuous]

        def forward(self, X, Z=None, diag=False):
            if diag:
                return self.variance.expand(X.size(0))
            return self.covariance(X, Z, variance=self.variance, lengthscale=self.lengthscale)

        def similarity(self, X, Z=None):
            """The Tanimoto factor on the bit columns (cached per pair of tensors)."""
            return cached(self, "_cached_similarity", X, Z, lambda A, B: tanimoto_similarity(
                self.split(A)[0], None if B is None else self.split(B)[0]))

        def covariance(self, X, Z=None, *, variance, lengthscale):
            """The kernel with its (constrained) hyperparameters passed in, as ``Matern52.covariance``."""
            Xc = cached(self, "_cached_continuous_X", X, None, lambda A, _: self.split(A)[1])
            Zc = None if Z is None else cached(self, "_cached_continuous_Z", Z, None, lambda A, _: self.split(A)[1])
            return variance * self.similarity(X, Z) * matern52_unit(Xc, Zc, lengthscale)

    _KERNEL_CLASSES.update(matern52=Matern52, rbf=RBF, tanimoto=Tanimoto, tanimoto_matern52=TanimotoMatern52)
    return _KERNEL_CLASSES


def make_kernel(kernel: KernelName, n_features: int, variance: float, lengthscale: float | list[float] | None,
                continuous: list[int] | None = None):
    """The kernel module; ``continuous`` (``tanimoto_matern52`` only): the columns of its Matérn factor."""
    torch, _, _ = require_torch_pyro()
    variance_t = torch.tensor(variance, dtype=torch.float64)
    if kernel in DISTANCE_KERNELS:
        lengthscale_t = torch.tensor(lengthscale, dtype=torch.float64)
        return kernel_classes()[kernel](input_dim=n_features, variance=variance_t, lengthscale=lengthscale_t)
    if kernel == "tanimoto":
        return kernel_classes()["tanimoto"](input_dim=n_features, variance=variance_t)
    if kernel == "tanimoto_matern52":
        return kernel_classes()["tanimoto_matern52"](n_features, list(continuous or []), variance=variance_t,
                                                     lengthscale=torch.tensor(lengthscale, dtype=torch.float64))
    raise SetupError(f"{kernel=} is not a known surrogate kernel; use one of {', '.join(KERNEL_NAMES)}")


def freeze(module, name: str, value: float) -> None:
    """Replace a PyroParam by a plain float64 tensor, so the value is used exactly (no constraint transform)."""
    import torch

    delattr(module, name)
    setattr(module, name, torch.tensor(value, dtype=torch.float64))
