"""Simulators: the rungs of the fidelity ladder below the lab.

Importing this package imports neither torch nor rdkit nor pymatgen; simulators import their backends when they
run. The result cache (``simulators.cache``) is imported where it is used, since it loads sqlmodel.

Example:
    >>> from vocabulary.domain import Molecule
    >>> [obs] = load_simulator("rdkit_descriptors").evaluate([Molecule.parse("c1ccccc1")])
    >>> obs.source, obs.properties["tpsa"]
    ('rdkit_descriptors', 0.0)
"""

__distribution__ = "closedloop"  # vocabulary.namespace reads this line to tell our packages from others

from simulators.base import (
    CANDIDATE_KINDS,
    AnyCandidate,
    BaseSimulator,
    Result,
    Simulator,
    require,
)
from simulators.chgnet import CHGNetSimulator
from simulators.composition import CompositionSimulator
from simulators.conformers import ConformerSimulator
from simulators.costing import LinearCost, measure_linear_cost
from simulators.dft import DFTSimulator
from simulators.executor import Executor, SerialExecutor, make_executor
from simulators.executor_batch import is_transient_failure
from simulators.executor_process import LocalProcessExecutor
from simulators.executor_ray import RayExecutor
from simulators.ladder import evaluate_rung
from simulators.prototypes import PrototypeSimulator
from simulators.rdkit_descriptors import RDKitDescriptorSimulator
from simulators.registry import ENTRY_POINT_GROUP, available_simulators, load_simulator
from simulators.table import TableSimulator
from simulators.xtb import XTBSimulator

__all__ = [
    "CANDIDATE_KINDS",
    "ENTRY_POINT_GROUP",
    "AnyCandidate",
    "BaseSimulator",
    "CHGNetSimulator",
    "CompositionSimulator",
    "ConformerSimulator",
    "DFTSimulator",
    "Executor",
    "LinearCost",
    "LocalProcessExecutor",
    "PrototypeSimulator",
    "RDKitDescriptorSimulator",
    "RayExecutor",
    "Result",
    "SerialExecutor",
    "Simulator",
    "TableSimulator",
    "XTBSimulator",
    "available_simulators",
    "evaluate_rung",
    "is_transient_failure",
    "load_simulator",
    "make_executor",
    "measure_linear_cost",
    "require",
]
