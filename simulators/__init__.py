"""Simulators: the rungs of the fidelity ladder below the lab.

Importing this package imports neither torch nor rdkit nor pymatgen; simulators import their backends when they
run.

Example:
    >>> from orchestrator.domain import Molecule
    >>> [obs] = load_simulator("rdkit_descriptors").evaluate([Molecule.parse("c1ccccc1")])
    >>> obs.source, obs.properties["tpsa"]
    ('rdkit_descriptors', 0.0)
"""

from simulators.base import CANDIDATE_KINDS, AnyCandidate, BaseSimulator, Result, Simulator, require
from simulators.costing import LinearCost, measure_linear_cost
from simulators.rdkit_descriptors import RDKitDescriptorSimulator
from simulators.registry import ENTRY_POINT_GROUP, available_simulators, load_simulator
from simulators.table import TableSimulator

__all__ = [
    "CANDIDATE_KINDS",
    "ENTRY_POINT_GROUP",
    "AnyCandidate",
    "BaseSimulator",
    "LinearCost",
    "RDKitDescriptorSimulator",
    "Result",
    "Simulator",
    "TableSimulator",
    "available_simulators",
    "load_simulator",
    "measure_linear_cost",
    "require",
]
