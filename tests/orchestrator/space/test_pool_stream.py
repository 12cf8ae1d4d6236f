"""The streamed pool: the same top k as the in-memory Pool, whatever the chunk size, in memory that does not grow
with the pool."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pandas as pd
import pytest

from orchestrator.policy.planners.acquisition_stream import log_ei_scorer
from orchestrator.space.pool import load_pool
from orchestrator.space.stream import condition_space_from_csv, count_rows, stream_top_k
from tests.conftest import BUCHWALD_SPEC, small_spec
from vocabulary.domain import SetupError, featurise

FREESOLV_CSV = BUCHWALD_SPEC.parents[1] / "freesolv" / "data" / "FreeSolv_gauche.csv"
BH_COLUMNS = ["Aryl_halide_SMILES", "Additive_SMILES", "Base_SMILES", "Ligand_SMILES"]


def linear_scorer(n_features: int, seed: int = 0):
    weights = np.random.default_rng(seed).normal(size=n_features)
    return lambda X: np.asarray(X, dtype=float) @ weights


def in_memory_top_k(pool, scorer, k: int, exclude=()) -> list[tuple[str, float]]:
    """The reference: score the whole materialised pool, best first, ties to the earlier pool row."""
    scores = scorer(pool.features)
    order = sorted((i for i, cid in enumerate(pool.ids) if cid not in set(exclude)), key=lambda i: (-scores[i], i))
    return [(pool.ids[i], float(scores[i])) for i in order[:k]]


def assert_same_ranking(top, expected: list[tuple[str, float]]) -> None:
    assert [c.candidate.id for c in top.best] == [cid for cid, _ in expected]
    assert [c.score for c in top.best] == pytest.approx([score for _, score in expected], rel=1e-9)


@pytest.fixture
def molecule_csv(tmp_path):
    """120 FreeSolv molecules, two of them repeated in another spelling, and one row that is not a molecule."""
    smiles = pd.read_csv(FREESOLV_CSV)["smiles"].head(120).tolist()
    rows = smiles[:60] + ["OCC", "not a smiles"] + smiles[60:] + ["C(C)O", smiles[3]]
    path = tmp_path / "molecules.csv"
    pd.DataFrame({"smiles": rows, "expt": np.arange(len(rows), dtype=float)}).to_csv(path, index=False)
    return path


@pytest.fixture
def molecule_pool(molecule_csv):
    return load_pool(small_spec(space__pool=str(molecule_csv), space__on_bad_rows="skip"))  # as the stream does


@pytest.fixture(scope="module")
def buchwald_pool():
    return load_pool(small_spec(BUCHWALD_SPEC, space__features="parameters"))  # what stream_top_k encodes


BUCHWALD_CSV = BUCHWALD_SPEC.parent / "data" / "experiment_index.csv"


@pytest.mark.parametrize("chunk_size", [1, 7, 50, 10_000])
def test_molecules_streamed_top_k_equals_the_in_memory_pool(molecule_csv, molecule_pool, chunk_size):
    scorer = linear_scorer(1024)
    exclude = molecule_pool.ids[:5]
    expected = in_memory_top_k(molecule_pool, scorer, 15, exclude)
    top = stream_top_k(molecule_csv, "molecule", scorer, 15, column="smiles", chunk_size=chunk_size, exclude_ids=exclude,
                       on_bad_rows="skip")
    assert_same_ranking(top, expected)
    assert top.n_rows == count_rows(molecule_csv) == 124
    assert top.n_invalid == 1 and top.skipped_rows[0].startswith("line 63: SMILES 'not a smiles'")
    assert top.n_excluded == 6  # rows: the fourth molecule is listed twice
    assert top.peak_chunk_rows == min(chunk_size, 124)


def test_streamed_fingerprints_are_the_domain_features(molecule_pool, molecule_csv):
    scores = {}
    top = stream_top_k(molecule_csv, "molecule", lambda X: X.sum(axis=1), 200, column="smiles", chunk_size=16,
                       on_bad_rows="skip")
    for scored in top.best:
        scores[scored.candidate.id] = scored.score
    assert len(scores) == len(molecule_pool)  # all distinct valid molecules, each once
    for cid, score in scores.items():
        assert score == featurise([molecule_pool.get(cid)]).sum()


def test_conditions_space_and_top_k_equal_the_in_memory_pool(buchwald_pool):
    space = condition_space_from_csv(BUCHWALD_CSV, BH_COLUMNS, chunk_size=500)
    assert space == buchwald_pool.space
    scorer = linear_scorer(buchwald_pool.features.shape[1], seed=3)
    exclude = buchwald_pool.ids[100:140]
    expected = in_memory_top_k(buchwald_pool, scorer, 25, exclude)
    for chunk_size in (333, 4096):
        top = stream_top_k(BUCHWALD_CSV, "conditions", scorer, 25, columns=BH_COLUMNS, chunk_size=chunk_size,
                           exclude_ids=exclude)
        assert_same_ranking(top, expected)
        assert top.n_rows == 3955 and top.n_invalid == 0


def test_ties_go_to_the_earlier_row_and_repeats_count_once(tmp_path):
    path = tmp_path / "grid.csv"
    values = ["b", "a", "b", "c", "a", "d"]
    pd.DataFrame({"solvent": values}).to_csv(path, index=False)
    top = stream_top_k(path, "conditions", lambda X: np.zeros(len(X)), 3, columns=["solvent"], chunk_size=2)
    assert [(c.row, c.candidate.values["solvent"]) for c in top.best] == [(0, "b"), (1, "a"), (3, "c")]
    assert top.n_duplicates == 2


def test_log_ei_scorer_ranks_like_the_acquisition(buchwald_pool):
    from orchestrator.policy.planners.acquisition import log_expected_improvement
    from orchestrator.policy.planners.surrogate import GPSurrogate

    X, y = buchwald_pool.features[:30].copy(), buchwald_pool.columns["yield"][:30].copy()
    surrogate = GPSurrogate.fit(X, y, n_steps=20)
    scorer = log_ei_scorer(surrogate, float(y.max()))
    mean, sd = surrogate.predict(buchwald_pool.features)
    expected = in_memory_top_k(buchwald_pool, lambda _: log_expected_improvement(mean, sd, float(y.max())), 5)
    top = stream_top_k(BUCHWALD_CSV, "conditions", scorer, 5, columns=BH_COLUMNS, space=buchwald_pool.space,
                       chunk_size=1000)
    assert_same_ranking(top, expected)


def write_grid(path, n_rows: int) -> None:
    rng = np.random.default_rng(n_rows)
    frame = pd.DataFrame({
        "temperature_c": np.round(rng.uniform(20, 120, n_rows), 3),
        "time_h": np.round(rng.uniform(0.5, 24, n_rows), 3),
        "solvent": rng.choice(["water", "dmso", "thf", "toluene"], n_rows),
    })
    frame.to_csv(path, index=False)


def peak_traced_bytes(path, chunk_size: int) -> int:
    space = condition_space_from_csv(path, ["temperature_c", "time_h", "solvent"], chunk_size=chunk_size)
    tracemalloc.start()
    try:
        stream_top_k(path, "conditions", lambda X: X[:, 0] - X[:, 1], 10, columns=["temperature_c", "time_h", "solvent"],
                     space=space, chunk_size=chunk_size)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_peak_memory_does_not_grow_with_the_pool(tmp_path):
    small, large = tmp_path / "small.csv", tmp_path / "large.csv"
    write_grid(small, 1_000)
    write_grid(large, 8_000)
    ratio = peak_traced_bytes(large, 250) / peak_traced_bytes(small, 250)
    assert ratio < 2.0  # 8× the rows; a materialised pool would need about 8× the memory


def test_clear_errors(tmp_path, molecule_csv):
    score = lambda X: X[:, 0]  # noqa: E731
    with pytest.raises(SetupError, match="does not exist"):
        stream_top_k(tmp_path / "nope.csv", "molecule", score, 3, column="smiles")
    with pytest.raises(SetupError, match=r"no column\(s\) \['SMILES'\]; its columns are \['smiles', 'expt'\]"):
        stream_top_k(molecule_csv, "molecule", score, 3, column="SMILES")
    with pytest.raises(SetupError, match="needs column="):
        stream_top_k(molecule_csv, "molecule", score, 3)
    with pytest.raises(SetupError, match="k=0"):
        stream_top_k(molecule_csv, "molecule", score, 0, column="smiles")
    with pytest.raises(SetupError, match="chunk_size=0"):
        stream_top_k(molecule_csv, "molecule", score, 3, column="smiles", chunk_size=0)
    with pytest.raises(SetupError, match="NaN"):
        stream_top_k(molecule_csv, "molecule", lambda X: np.full(len(X), np.nan), 3, column="smiles", on_bad_rows="skip")
    with pytest.raises(SetupError, match="shape"):
        stream_top_k(molecule_csv, "molecule", lambda X: X, 3, column="smiles", on_bad_rows="skip")
    bad = tmp_path / "bad.csv"
    bad.write_text("smiles\nnot one\nnor this\n")
    with pytest.raises(SetupError, match="no row of pool bad.csv parsed as a molecule"):
        stream_top_k(bad, "molecule", score, 3, column="smiles", on_bad_rows="skip")
    with pytest.raises(SetupError, match=r"pool bad.csv has 2 bad row\(s\): line 2: SMILES 'not one'"):
        stream_top_k(bad, "molecule", score, 3, column="smiles")
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(SetupError, match="empty"):
        count_rows(empty)
    with pytest.raises(SetupError, match="does not exist"):
        count_rows(tmp_path / "nope.csv")
