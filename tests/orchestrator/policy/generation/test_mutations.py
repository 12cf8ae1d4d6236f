"""Neighbours, constraints and novelty in open design spaces."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from orchestrator.policy.generation import constraint_error, neighbours, novelty
from orchestrator.policy.generation.mutations import (
    material_neighbours,
    molecule_neighbours,
)
from orchestrator.space.pool import Pool
from vocabulary.domain import Material, Molecule

SPACE = SimpleNamespace(max_heavy_atoms=8, max_atoms=8, elements=["C", "N", "O", "F", "Cl"])


def test_molecule_neighbours_are_valid_unique_and_within_limits():
    found = molecule_neighbours(Molecule.parse("c1ccccc1O"), SPACE)
    ids = [m.id for m in found]
    assert len(ids) == len(set(ids)) > 10
    assert all(constraint_error(SPACE, m) is None for m in found)
    assert Molecule.parse("c1ccncc1O").id in ids or Molecule.parse("Oc1cccnc1").id in ids  # C -> N in the ring
    assert Molecule.parse("c1ccccc1O").id not in ids


def test_neighbours_respect_known_ids_and_are_deterministic():
    parents = [Molecule.parse("CCO"), Molecule.parse("CCN")]
    known = {Molecule.parse("CCCO").id}
    first = neighbours(parents, SPACE, n=10, known=known, seed=3)
    again = neighbours(parents, SPACE, n=10, known=known, seed=3)
    assert [m.id for m in first] == [m.id for m in again]
    assert len(first) == 10 and not known & {m.id for m in first}


def test_material_neighbours_substitute_within_groups_and_balance_charge():
    found = {m.id for m in material_neighbours(Material.parse("LiFePO4"), SimpleNamespace(max_heavy_atoms=None, max_atoms=12, elements=None))}
    assert "NaFePO4" in found and "LiFeAsO4" in found
    for formula in found:
        assert Material.parse(formula).to_composition().oxi_state_guesses(max_sites=-1)


@pytest.mark.parametrize(("smiles", "fragment"), [("CCCCCCCCCC", "10 heavy atoms"), ("CCS", "uses S")])
def test_constraint_messages_name_the_limit(smiles, fragment):
    message = constraint_error(SimpleNamespace(max_heavy_atoms=8, max_atoms=None, elements=["C", "O"]), Molecule.parse(smiles))
    assert fragment in message and "propose" in message


def test_novelty_is_zero_for_known_and_grows_with_distance():
    known = [Molecule.parse("CCO")]
    assert novelty(Molecule.parse("OCC"), known) == 0.0
    assert 0.0 < novelty(Molecule.parse("CCCO"), known) < novelty(Molecule.parse("c1ccccc1Cl"), known) <= 1.0


def test_pool_extension_keeps_features_and_columns_aligned():
    pool = Pool("molecule", [Molecule.parse("CCO")], {"x": __import__("numpy").array([1.0])}).copy()
    _ = pool.features
    added = pool.extend([Molecule.parse("CCN"), Molecule.parse("CCO")])
    assert [m.smiles for m in added] == ["CCN"] and pool.seed_size == 1
    assert pool.features.shape[0] == len(pool) == 2 and len(pool.columns["x"]) == 2
    assert pool.index["QUSNBJAOOMFDIB-UHFFFAOYSA-N"] == 1
