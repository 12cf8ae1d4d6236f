"""The ``botorch-onehot`` arm: BoTorch on one-hot categories (SMILES columns too) and scaled numbers."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from orchestrator.planner_registry import make_planner
from orchestrator.policy.planners import PlanningContext
from orchestrator.policy.planners.botorch_onehot import (
    BoTorchOneHotPlanner,
    onehot_inputs,
)
from orchestrator.policy.planners.botorch_planner import BoTorchPlanner
from orchestrator.space.pool import load_pool
from orchestrator.spec import validate_spec
from vocabulary.domain import Molecule

LIGANDS = ["CCO", "CCN", "c1ccccc1"]  # RDKit canonical SMILES: the pool keeps them as written
BASES = ["DBU", "K2CO3"]
TEMPERATURES = [20.0, 50.0, 80.0]


def _spec(tmp_path, frame: pd.DataFrame, columns: list[str], **space):
    frame.to_csv(tmp_path / "pool.csv", index=False)
    return validate_spec({
        "campaign": {"name": "onehot", "kind": "conditions", "seed": 0},
        "objective": {"property": "y", "direction": "maximize"},
        "space": {"pool": str(tmp_path / "pool.csv"), "columns": columns, **space},
        "lab": {"driver": "simlab", "oracle_column": "y", "noise_sd": 0.0},
        "budget": {"lab_experiments": 10},
        "planner": {"main": "botorch-onehot", "control": None, "control_share": 0.0, "batch_size": 3},
    }, source="test")


@pytest.fixture
def grid(tmp_path):
    """18 reactions: a ligand as SMILES, a base by name and a temperature; yield peaks for benzene at 50 °C."""
    rows = [{"ligand": s, "base": b, "T": t} for s in LIGANDS for b in BASES for t in TEMPERATURES]
    frame = pd.DataFrame(rows)
    frame["y"] = [(r["ligand"] == "c1ccccc1") * 50 + (r["base"] == "DBU") * 10 - abs(r["T"] - 50) / 3 for r in rows]
    return _spec(tmp_path, frame, ["ligand", "base", "T"])


def _context(spec, pool, observed, *, seed=0) -> PlanningContext:
    observed = np.asarray(observed, dtype=int)
    values = np.asarray(pool.columns["y"], dtype=float)[observed]
    return PlanningContext(spec=spec, pool=pool, iteration=2, available=np.setdiff1d(np.arange(len(pool)), observed),
                           observed=observed, utilities=values, values=values, pending=np.zeros(0, dtype=int),
                           surrogate_state=None, seed=seed)


def test_smiles_and_category_columns_are_one_hot_and_numbers_scaled(grid):
    pool = load_pool(grid)
    assert pool.features.shape[1] > 10  # the pool's own features: Morgan bits for the ligand column
    X, note = BoTorchOneHotPlanner().features(pool)
    expected = np.asarray([[float(c.values["ligand"] == s) for s in sorted(LIGANDS)]
                           + [float(c.values["base"] == b) for b in sorted(BASES)]
                           + [(c.values["T"] - 20.0) / 60.0] for c in pool.candidates])
    assert X.shape == (18, 6) and np.array_equal(X, expected)
    assert note == "one-hot categories, scaled numbers"
    assert set(np.unique(X[:, :5])) == {0.0, 1.0} and X[:, 5].min() == 0.0 and X[:, 5].max() == 1.0


def test_columns_constant_over_the_pool_are_dropped(tmp_path):
    frame = pd.DataFrame({"ligand": ["CCO", "CCN"] * 3, "solvent": ["DMF"] * 6, "T": [20.0, 20.0, 50, 50, 80, 80]})
    frame["y"] = np.arange(6.0)
    X, _ = BoTorchOneHotPlanner().features(load_pool(_spec(tmp_path, frame, ["ligand", "solvent", "T"])))
    assert X.shape == (6, 3)  # two ligand codes and the temperature; the one solvent tells nothing


def test_a_pool_without_smiles_or_formula_columns_keeps_its_features_and_botorchs_picks(tmp_path):
    rows = [{"base": b, "T": t} for b in ("DBU", "K2CO3", "Et3N") for t in np.linspace(20, 80, 6)]
    frame = pd.DataFrame(rows)
    frame["y"] = [(r["base"] == "Et3N") * 5 - abs(r["T"] - 44) / 10 for r in rows]
    spec = _spec(tmp_path, frame, ["base", "T"])
    pool = load_pool(spec)
    X, note = BoTorchOneHotPlanner().features(pool)
    assert X is pool.features and note.startswith("the pool's features, already one-hot")
    context = _context(spec, pool, [0, 5, 9, 14])
    onehot = [p.candidate.id for p in BoTorchOneHotPlanner().propose(context, 3)]
    assert onehot == [p.candidate.id for p in BoTorchPlanner().propose(context, 3)]  # one seed for both arms


def test_a_smiles_only_pool_falls_back_to_botorchs_features(tmp_path):
    smiles = ["CCO", "CCN", "CCC", "CCCl", "c1ccccc1", "CC(=O)O", "OCCO", "CCOC"]
    frame = pd.DataFrame({"smiles": smiles, "y": np.arange(8.0)})
    spec = _spec(tmp_path, frame, ["smiles"])
    pool = load_pool(spec)
    X, note = BoTorchOneHotPlanner().features(pool)
    assert X is pool.features and "gives every candidate its own value" in note
    context = _context(spec, pool, [0, 3, 6])
    onehot = BoTorchOneHotPlanner().propose(context, 2)
    assert [p.candidate.id for p in onehot] == [p.candidate.id for p in BoTorchPlanner().propose(context, 2)]
    assert "the pool's own features" in onehot[0].rationale
    molecules = load_pool(validate_spec({**spec.model_dump(), "campaign": {**spec.campaign.model_dump(),
                                                                         "kind": "molecule"},
                                         "space": {"pool": str(tmp_path / "pool.csv"), "column": "smiles"}},
                                        source="test"))
    assert isinstance(molecules.candidates[0], Molecule)
    X, note = onehot_inputs(molecules)
    assert X is molecules.features and "molecule pool has no columns to one-hot" in note


def test_it_proposes_distinct_untested_pool_candidates_deterministically(grid):
    pool = load_pool(grid)
    planner = make_planner("botorch-onehot", grid)
    assert isinstance(planner, BoTorchOneHotPlanner) and planner.name == "botorch-onehot"
    assert not planner.traits.uses_ladder and not planner.traits.uses_surrogate
    context = _context(grid, pool, [0, 4, 8, 13])
    proposals = planner.propose(context, 4)
    ids = [p.candidate.id for p in proposals]
    tested = {pool.ids[i] for i in context.observed}
    assert len(ids) == 4 == len(set(ids)) and all(cid in pool.index and cid not in tested for cid in ids)
    assert all(p.arm == "botorch-onehot" and "one-hot categories, scaled numbers" in p.rationale for p in proposals)
    assert ids == [p.candidate.id for p in BoTorchOneHotPlanner().propose(context, 4)]
    cold = planner.propose(_context(grid, pool, [0]), 3)  # fewer than 2 results: the bo arm's initial design
    assert [p.candidate.id for p in cold] == [p.candidate.id for p in BoTorchPlanner().propose(_context(grid, pool, [0]), 3)]


def test_a_streamed_pool_encodes_as_the_pool_in_memory(grid):
    in_memory = load_pool(grid)
    streamed = load_pool(validate_spec({**grid.model_dump(), "space": {**grid.space.model_dump(), "stream": True}},
                                       source="test"))
    assert type(streamed).__name__ == "CompactPool"
    X_streamed, _ = onehot_inputs(streamed)
    X_memory, _ = onehot_inputs(in_memory)
    order = [in_memory.index[streamed.ids[k]] for k in range(len(streamed))]
    assert np.array_equal(X_streamed, X_memory[order])
