"""Molecule depictions: an rdkit SVG for a molecule, None for anything that is not one."""

from __future__ import annotations

import xml.etree.ElementTree as ElementTree

import pytest

from orchestrator.space.depiction import candidate_svg, molecule_svg
from vocabulary.domain import Conditions, Material, Molecule


def test_a_molecule_is_drawn_as_inline_svg_of_the_requested_size():
    svg = molecule_svg("CC(=O)Oc1ccccc1C(=O)O", width=300, height=200)

    root = ElementTree.fromstring(svg)  # well-formed, with no XML declaration before it
    assert root.tag.endswith("svg")
    assert root.get("width").startswith("300") and root.get("height").startswith("200")
    assert "<path" in svg  # bonds are drawn


def test_two_spellings_of_one_molecule_draw_the_same_structure():
    assert molecule_svg("OCC") != molecule_svg("c1ccccc1")
    assert molecule_svg("C(C)O") == molecule_svg("C(C)O")


@pytest.mark.parametrize("text", ["", "   ", "C1CC", "[Xx]", "CC(C", "CCO C", "x" * 3000, None, 12.5])
def test_text_that_is_not_a_molecule_has_no_drawing(text):
    assert molecule_svg(text) is None


def test_candidates_draw_their_molecule_and_only_that():
    assert candidate_svg(Molecule.parse("c1ccccc1O")).startswith("<svg")
    assert candidate_svg(Material.parse("LiFePO4")) is None
    conditions = Conditions(values={"base": "CsOAc", "ligand": "CC(C)(C)P(C(C)(C)C)C(C)(C)C", "T": 90.0}, id="x")
    assert candidate_svg(conditions) == molecule_svg("CC(C)(C)P(C(C)(C)C)C(C)(C)C")
    labels_only = Conditions(values={"solvent": "none", "additive": "CO", "T": 25.0}, id="y")
    assert candidate_svg(labels_only) is None


def test_conditions_with_several_molecules_draw_one_panel_each_in_the_size_asked():
    conditions = Conditions(values={"Aryl_halide_SMILES": "FC(F)(F)c1ccc(Cl)cc1", "Additive_SMILES": "o1nccc1c2ccccc2",
                                    "Base_SMILES": "CN(C)C(=NC(C)(C)C)N(C)C", "T": 60.0}, id="z")
    svg = candidate_svg(conditions, width=600, height=150)  # three molecules: one row of three 200 x 150 panels

    root = ElementTree.fromstring(svg)
    assert root.get("width").startswith("600") and root.get("height").startswith("150")
    assert svg != molecule_svg("FC(F)(F)c1ccc(Cl)cc1", width=600, height=150)
