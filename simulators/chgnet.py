"""Rung 2 for materials: relax the best prototype structure with the CHGNet universal potential.

CHGNet (Deng et al., Nature Machine Intelligence 2023) ships its pretrained weights inside its wheel, so this rung
runs offline. It needs the optional dependency: ``pip install "closedloop[materials]"``. chgnet and torch are
imported when the first candidate is relaxed, not when this module is imported.

Threads: ``calculate`` sets torch to one intra-op thread for the relaxation and restores the previous setting
afterwards. ``torch.set_num_threads`` is process-global, so this rung must not share a process with concurrent torch
work in other threads. The executors' workers each run one candidate at a time, which is what the cost model assumes.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import io
import math
import warnings
from functools import lru_cache
from typing import Any

import numpy as np

from simulators.base import AnyCandidate, BaseSimulator
from simulators.structures import best_prototype_structure
from vocabulary.domain import Material, SetupError, SimulationFailed, import_optional

__all__ = ["MODEL_NAME", "CHGNetSimulator"]

MODEL_NAME = "0.3.0"
"""The pretrained CHGNet weights (MPtrj, GGA/GGA+U energies with MP2020 corrections) shipped with chgnet."""

# Cost per candidate = INTERCEPT_S + PER_ATOM_S * n_atoms (atoms in the prototype's primitive cell), in seconds, at
# the defaults (BFGS, fmax 0.1 eV/Å, 100 steps). Measured on 20 binary and ternary oxides, halides and nitrides
# with 2-14 atom cells, median of 3 single-candidate evaluate() calls after the model was loaded: a relaxation takes
# 0-12 steps of about 20 ms per atom each; a single point costs 13-30 ms whatever the size, which is the intercept;
# the slope is a least-squares fit with that intercept (R² 0.76). Shared 2-core machine, one torch thread,
# chgnet 0.4.2, torch 2.13 CPU. Loading torch and the model (about 8 s) happens once per process and is not charged.
INTERCEPT_S = 0.02
PER_ATOM_S = 0.17

DEFAULT_FMAX_EV_A = 0.1
DEFAULT_STEPS = 100
OPTIMIZERS = ("BFGS", "FIRE", "LBFGS")
"""ASE optimisers accepted; BFGS is the default because it needs about a third of FIRE's steps on these cells."""

_VERSION = "1"


class CHGNetSimulator(BaseSimulator):
    """Relax the lowest-Ewald-energy prototype of a composition (cell and positions) with CHGNet.

    Properties:
        ``energy_per_atom_ev``: CHGNet energy of the relaxed structure, eV/atom (MP2020-compatible scale, so it
        can be compared with Materials Project energies, not with raw DFT totals).
        ``initial_energy_per_atom_ev``: the same for the unrelaxed prototype.
        ``volume_per_atom_a3``: relaxed volume, Å³/atom.
        ``n_relax_steps``: optimiser steps taken (with ASE's Fréchet cell filter, so the cell relaxes too).
        ``max_force_ev_a``: largest atomic force left after relaxation, eV/Å.
        ``is_converged``: 1.0 if the optimiser stopped before ``steps``, else 0.0.
        ``magmom_mean``: mean predicted magnetic moment magnitude per site, μB.

    Args:
        fmax: force threshold for the relaxation, eV/Å.
        steps: the most optimiser steps to take; 0 gives a single-point energy of the prototype.
        optimizer: one of ``OPTIMIZERS``.

    A composition without a prototype (see ``simulators.structures``) or a relaxation that raises or comes out
    non-finite is a failed observation. The rung is deterministic on CPU.

    Example:
        >>> from vocabulary.domain import Material
        >>> [obs] = CHGNetSimulator(steps=0).evaluate([Material.parse("NaCl")])
        >>> obs.status, obs.properties["n_relax_steps"], round(obs.properties["energy_per_atom_ev"], 1)
        ('ok', 0.0, -3.7)
    """

    name = "chgnet"
    fidelity = 2
    implemented_properties = (
        "energy_per_atom_ev",
        "initial_energy_per_atom_ev",
        "volume_per_atom_a3",
        "n_relax_steps",
        "max_force_ev_a",
        "is_converged",
        "magmom_mean",
    )
    applies_to = frozenset({"material"})
    requires = (("chgnet", "materials"),)

    def __init__(self, fmax: float = DEFAULT_FMAX_EV_A, steps: int = DEFAULT_STEPS, optimizer: str = "BFGS") -> None:
        if isinstance(fmax, bool) or not isinstance(fmax, (int, float)) or not math.isfinite(fmax) or fmax <= 0:
            raise SetupError(f"{fmax=} must be a positive force threshold in eV/Å, e.g. {DEFAULT_FMAX_EV_A}")
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 0:
            raise SetupError(f"{steps=} must be a whole number of optimiser steps >= 0, e.g. {DEFAULT_STEPS}")
        if optimizer not in OPTIMIZERS:
            raise SetupError(f"{optimizer=} is not one of {list(OPTIMIZERS)}; BFGS is the default")
        self.fmax = float(fmax)
        self.steps = steps
        self.optimizer = optimizer
        self.version = f"{_VERSION}+chgnet{_installed_version('chgnet')}-{MODEL_NAME}"
        super().__init__({"fmax": self.fmax, "steps": steps, "optimizer": optimizer})

    def cost_model(self, candidate: AnyCandidate) -> float:
        """Seconds for one candidate: a linear fit in atoms of the prototype cell, measured at the defaults.

        A candidate without a prototype is charged the intercept; its failure is reported by ``calculate``.
        """
        try:
            n_atoms = len(best_prototype_structure(candidate)[1]) if isinstance(candidate, Material) else 0
        except Exception:  # no prototype, or an unreadable formula
            n_atoms = 0
        return INTERCEPT_S + PER_ATOM_S * n_atoms

    def calculate(self, candidate: AnyCandidate) -> dict[str, Any]:
        """Relax one material's best prototype; ``SimulationFailed`` when there is none or the relaxation fails."""
        torch = import_optional("torch", "materials", "the chgnet rung")

        prototype, structure = best_prototype_structure(candidate)
        structure.remove_oxidation_states()
        optimizer = _struct_optimizer(self.optimizer)
        threads = torch.get_num_threads()
        torch.set_num_threads(1)  # process-global; restored below (see the module docstring)
        try:
            with warnings.catch_warnings():
                # chgnet builds a tensor from tensors during relaxation; torch's advice about it is noise here
                warnings.filterwarnings("ignore", "Converting a tensor with requires_grad", UserWarning)
                result = optimizer.relax(structure, fmax=self.fmax, steps=self.steps, relax_cell=True, verbose=False)
        except Exception as exc:  # chgnet raises ValueError for isolated atoms, RuntimeError from torch, ...
            raise SimulationFailed(
                f"CHGNet relaxation of the {prototype} structure of {candidate.id} failed: {type(exc).__name__}: {exc}"
            ) from exc
        finally:
            torch.set_num_threads(threads)
        trajectory, final = result["trajectory"], result["final_structure"]
        n_atoms = len(final)
        # the observer records the start, every step, and once more after the run
        n_steps = max(len(trajectory) - 2, 0)
        magmoms = final.site_properties.get("magmom")
        properties = {
            "energy_per_atom_ev": float(trajectory.energies[-1]) / n_atoms,
            "initial_energy_per_atom_ev": float(trajectory.energies[0]) / n_atoms,
            "volume_per_atom_a3": final.volume / n_atoms,
            "n_relax_steps": float(n_steps),
            "max_force_ev_a": float(np.linalg.norm(np.asarray(trajectory.forces[-1]), axis=1).max()),
            "is_converged": float(n_steps < self.steps),
        }
        if magmoms is not None:
            properties["magmom_mean"] = float(np.mean(np.abs(magmoms)))
        return properties


@lru_cache(maxsize=1)
def _model():
    """The pretrained model, loaded once per process (about 0.1 s once torch is imported, which takes seconds)."""
    CHGNet = import_optional("chgnet.model", "materials", "the chgnet rung").CHGNet

    with contextlib.redirect_stdout(io.StringIO()):  # chgnet prints its size and device; stdout is the caller's
        return CHGNet.load(model_name=MODEL_NAME, use_device="cpu", verbose=False)


@lru_cache(maxsize=len(OPTIMIZERS))
def _struct_optimizer(optimizer: str):
    """One ``StructOptimizer`` per optimiser, sharing the model. Not thread-safe: relax() rebinds its calculator."""
    StructOptimizer = import_optional("chgnet.model", "materials", "the chgnet rung").StructOptimizer

    with contextlib.redirect_stdout(io.StringIO()):
        return StructOptimizer(model=_model(), optimizer_class=optimizer, use_device="cpu", on_isolated_atoms="error")


def _installed_version(distribution: str) -> str:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "missing"  # construction then raises SetupError with the install hint
