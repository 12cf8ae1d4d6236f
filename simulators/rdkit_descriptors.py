"""Rung 0 for molecules: rdkit 2D descriptors, computed from the SMILES in about a millisecond.

rdkit is imported inside the methods, so ``import simulators`` stays fast.
"""

from __future__ import annotations

import importlib.util
from functools import lru_cache
from pathlib import Path
from types import ModuleType

from simulators.base import AnyCandidate, BaseSimulator
from vocabulary.domain import Molecule, SetupError, SimulationFailed

__all__ = ["RDKitDescriptorSimulator"]

# Cost per molecule = INTERCEPT_S + PER_HEAVY_ATOM_S * n_heavy_atoms, in seconds. Measured with
# simulators.costing.measure_linear_cost over the first 200 molecules (1..22 heavy atoms) of
# /work/shared/data/freesolv/FreeSolv_gauche.csv: each point is the median of 5 or 9 single-candidate evaluate()
# calls; the constants are the means of six such fits (intercepts 0.69..0.99 ms, slopes 0.10..0.13 ms/atom),
# 1 CPU, OMP_NUM_THREADS=1, rdkit 2026.09.1, Python 3.11. See DECISIONS.md.
INTERCEPT_S = 8.1e-4
PER_HEAVY_ATOM_S = 1.1e-4

_VERSION = "1"


class RDKitDescriptorSimulator(BaseSimulator):
    """Cheap 2D descriptors of a molecule.

    Properties: ``logp`` (Wildman-Crippen logP, log10 octanol/water), ``mr`` (Crippen molar refractivity,
    cm³/mol), ``tpsa`` (topological polar surface area from N and O, Å²), ``qed`` (Bickerton drug-likeness, 0..1),
    ``sa_score`` (Ertl-Schuffenhauer synthetic accessibility, 1 easy .. 10 hard), ``mol_weight`` (average, g/mol),
    ``n_hbd`` and ``n_hba`` (rdkit's Lipinski-style donor and acceptor counts), ``n_rotatable_bonds``,
    ``n_heavy_atoms`` and ``fraction_csp3`` (0..1). Fingerprints are not properties; use ``Molecule.features()``.

    ``version`` includes the rdkit version, because descriptor values can move between rdkit releases.

    Example:
        >>> from vocabulary.domain import Molecule
        >>> [obs] = RDKitDescriptorSimulator().evaluate([Molecule.parse("CCO")])
        >>> round(obs.properties["logp"], 4), obs.properties["tpsa"], obs.properties["n_heavy_atoms"]
        (-0.0014, 20.23, 3.0)
    """

    name = "rdkit_descriptors"
    fidelity = 0
    implemented_properties = (
        "logp",
        "mr",
        "tpsa",
        "qed",
        "sa_score",
        "mol_weight",
        "n_hbd",
        "n_hba",
        "n_rotatable_bonds",
        "n_heavy_atoms",
        "fraction_csp3",
    )
    applies_to = frozenset({"molecule"})

    def __init__(self) -> None:
        import rdkit

        self.version = f"{_VERSION}+rdkit{rdkit.__version__}"
        super().__init__({})

    def check_dependencies(self) -> None:
        """rdkit is a core dependency; its Contrib SA_Score module is checked here."""
        super().check_dependencies()
        _sascorer()

    def cost_model(self, candidate: AnyCandidate) -> float:
        """Seconds for one molecule: a linear fit in heavy atoms, measured on the reference machine."""
        mol = candidate.to_rdkit() if isinstance(candidate, Molecule) else None
        n_heavy_atoms = mol.GetNumHeavyAtoms() if mol is not None else 0
        return INTERCEPT_S + PER_HEAVY_ATOM_S * n_heavy_atoms

    def calculate(self, candidate: AnyCandidate) -> dict[str, float]:
        """All descriptors of one molecule; ``SimulationFailed`` if rdkit cannot read or score it."""
        from rdkit.Chem import QED, Crippen, Descriptors, rdMolDescriptors

        mol = candidate.to_rdkit()
        if mol is None:
            raise SimulationFailed(f"rdkit could not read SMILES {candidate.smiles!r} of {candidate.id}")
        if mol.GetNumHeavyAtoms() == 0:
            raise SimulationFailed(f"{candidate.smiles!r} has no heavy atoms; the descriptors are undefined for it")
        sa_score = _sascorer().calculateScore(mol)
        if sa_score is None:
            raise SimulationFailed(f"SA score is undefined for {candidate.smiles!r}")
        return {
            "logp": Crippen.MolLogP(mol),
            "mr": Crippen.MolMR(mol),
            "tpsa": rdMolDescriptors.CalcTPSA(mol),
            "qed": QED.qed(mol),
            "sa_score": sa_score,
            "mol_weight": Descriptors.MolWt(mol),
            "n_hbd": rdMolDescriptors.CalcNumHBD(mol),
            "n_hba": rdMolDescriptors.CalcNumHBA(mol),
            "n_rotatable_bonds": rdMolDescriptors.CalcNumRotatableBonds(mol),
            "n_heavy_atoms": mol.GetNumHeavyAtoms(),
            "fraction_csp3": rdMolDescriptors.CalcFractionCSP3(mol),
        }


@lru_cache(maxsize=1)
def _sascorer() -> ModuleType:
    """Ertl's SA score from rdkit's Contrib directory (pip wheels ship it as ``rdkit.Contrib.SA_Score``)."""
    try:
        from rdkit.Contrib.SA_Score import sascorer

        return sascorer
    except ImportError:
        pass
    # conda builds keep Contrib outside the package: load it by path rather than editing sys.path.
    from rdkit import RDConfig

    path = Path(RDConfig.RDContribDir) / "SA_Score" / "sascorer.py"
    spec = importlib.util.spec_from_file_location("closedloop_sascorer", path) if path.is_file() else None
    if spec is None or spec.loader is None:
        raise SetupError(
            f"rdkit's Contrib SA_Score module was not found (looked for {path}); the rdkit_descriptors rung needs "
            'it for sa_score; reinstall rdkit from PyPI: pip install --force-reinstall "rdkit>=2024.3"'
        )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
