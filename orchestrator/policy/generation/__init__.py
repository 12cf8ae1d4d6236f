"""Generator mode: open design spaces that grow as the campaign runs.

With ``[space] generate = true`` the pool is only a seed library. Each iteration adds deterministic neighbours of
the best candidates so far (``mutations``), and the llm arm may write new SMILES or formulas. Every addition is
validated by rdkit or pymatgen, checked against the space's constraints, deduplicated by canonical id and recorded
as a ``PoolExtended`` event, so a resumed campaign rebuilds exactly the same pool.
"""

from orchestrator.policy.generation.constraints import constraint_error
from orchestrator.policy.generation.mutations import neighbours
from orchestrator.policy.generation.novelty import novelty

__all__ = ["constraint_error", "neighbours", "novelty"]
