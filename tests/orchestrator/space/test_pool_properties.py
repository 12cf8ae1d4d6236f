"""Property: whatever a pool CSV holds, loading it gives a valid pool or a SetupError, never another exception."""

from __future__ import annotations

import itertools
import tempfile
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator.space.pool import load_pool
from orchestrator.spec import validate_spec
from vocabulary.domain import SetupError

SMILES = ["CCO", "OCC", "c1ccccc1", "C1CC", "CC(C", "[Xx]", "N#N", "C" * 40]
FORMULAS = ["NaCl", "Fe2O3", "Fe1e400O", "Fe1e308O", "XzO", "Li0.5CoO2", "Fe-2O3", "O0"]
NUMBERS = ["1", "-2.5", "nan", "NaN", "inf", "-inf", "1e400", "-1e308", "1e308", "", "abc", "0x10", "1,5", '"3"']
SETTINGS = settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
_counter = itertools.count()


def cell(candidates: list[str] = NUMBERS) -> st.SearchStrategy[str]:
    return st.one_of(st.sampled_from(candidates), st.sampled_from(NUMBERS), st.text(max_size=8))


def _spec(directory: Path, kind: str, policies: tuple[str, str]) -> dict:
    space = {"conditions": {"columns": ["a", "b"]}, "molecule": {"column": "x"}, "material": {"column": "x"}}[kind]
    return {"campaign": {"name": "p", "kind": kind}, "objective": {"direction": "maximize"},
            "space": {"pool": "pool.csv", **space, "on_bad_rows": policies[0], "replicates": policies[1]},
            "lab": {"oracle_column": "y"}, "budget": {"lab_experiments": 1},
            "planner": {"main": "random", "control": None, "control_share": 0}, "base_dir": str(directory)}


def _load(content: bytes, kind: str, policies: tuple[str, str]):
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "pool.csv"
        path.write_bytes(content)
        spec = validate_spec(_spec(Path(directory), kind, policies))
        try:
            pool = load_pool(spec)
        except SetupError as exc:
            assert str(exc), "a refusal says why"
            return None
        assert len(pool) >= 1 and len(set(pool.ids)) == len(pool)
        assert np.isfinite(pool.columns["y"]).all(), "every candidate has a finite lab value"
        assert pool.features.shape[0] == len(pool) and np.isfinite(pool.features).all()
        return pool


policies = st.tuples(st.sampled_from(["refuse", "skip"]), st.sampled_from(["must_agree", "average"]))


@st.composite
def pool_csv(draw, kind: str) -> bytes:
    candidates = SMILES if kind == "molecule" else FORMULAS
    n_rows = draw(st.integers(0, 6))
    if kind == "conditions":
        header = "a,b,y"
        rows = [f"{draw(st.sampled_from(NUMBERS))},{draw(cell(['x', 'y', 'none']))},{draw(cell())}"
                for _ in range(n_rows)]
    else:
        header = "x,y"
        rows = [f"{draw(cell(candidates))},{draw(cell())}" for _ in range(n_rows)]
    rows += draw(st.lists(st.sampled_from(rows), max_size=2)) if rows else []  # exact duplicates too
    return ("\n".join([header, *rows]) + draw(st.sampled_from(["", "\n", "\n\n"]))).encode()


@SETTINGS
@given(content=pool_csv("molecule"), chosen=policies)
def test_a_molecule_pool_loads_or_is_refused(content, chosen):
    _load(content, "molecule", chosen)


@SETTINGS
@given(content=pool_csv("material"), chosen=policies)
def test_a_material_pool_loads_or_is_refused(content, chosen):
    _load(content, "material", chosen)


@SETTINGS
@given(content=pool_csv("conditions"), chosen=policies)
def test_a_conditions_pool_loads_or_is_refused(content, chosen):
    _load(content, "conditions", chosen)


@SETTINGS
@given(content=st.one_of(st.binary(max_size=64), st.text(max_size=64).map(str.encode)),
       prefix=st.sampled_from([b"", b"x,y\n", b"\xef\xbb\xbfx,y\nCCO,1\n"]))
def test_any_bytes_load_or_are_refused(content, prefix):
    _load(prefix + content, "molecule", ("refuse", "must_agree"))


def test_a_material_reads_as_its_formula_without_amounts_of_one():
    """pymatgen writes 'Rb2V1Cu1S4'; a summary, a prompt and an offer show 'Rb2VCuS4', as a chemist writes it."""
    import json

    from orchestrator.loop.summary import _label
    from orchestrator.space.pool import describe
    from vocabulary.domain import Material

    material = Material.parse("Rb2VCuS4")
    assert material.formula == "Rb2V1Cu1S4", "the stored formula is pymatgen's, unchanged (ledgers replay as written)"
    assert describe(material) == _label(json.dumps(material.model_dump(mode="json"))) == "Rb2VCuS4"
    assert describe(Material.parse("Fe10O15")) == "Fe10O15" and describe(Material.parse("C1Cl1")) == "CCl"
