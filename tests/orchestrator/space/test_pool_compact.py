"""Streamed conditions pools (``orchestrator.space.compact``): the same pool, the same batches, the same campaign."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from orchestrator.ledger import verify
from orchestrator.loop.campaign import Campaign
from orchestrator.space.compact import CompactPool, should_stream
from orchestrator.space.pool import load_pool
from tests.conftest import BUCHWALD_SPEC, small_spec
from vocabulary.domain import SetupError

BH_DATA = BUCHWALD_SPEC.parent / "data" / "experiment_index.csv"
REAGENTS = ["Aryl_halide_SMILES", "Additive_SMILES", "Base_SMILES", "Ligand_SMILES"]


def _design_table(path, n_rows: int, *, seed: int = 0, bad_line: int | None = None) -> None:
    """A numeric design table with one categorical column and a smooth yield (no two rows alike)."""
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({"temperature_c": np.round(rng.uniform(20, 120, n_rows), 2),
                          "time_h": np.round(rng.uniform(0.5, 24, n_rows), 2),
                          "equiv": np.round(rng.uniform(1, 3, n_rows), 3),
                          "solvent": rng.choice(["dmso", "water", "thf", "toluene"], n_rows)})
    bonus = frame["solvent"].map({"dmso": 5.0, "water": 0.0, "thf": 2.0, "toluene": -3.0})
    frame["yield"] = (80 - 0.01 * (frame["temperature_c"] - 85) ** 2 - (frame["time_h"] - 10) ** 2 / 8
                      - 4 * (frame["equiv"] - 2) ** 2 + bonus).round(3)
    if bad_line is not None:
        frame.loc[bad_line - 2, "time_h"] = np.nan  # line 1 is the header
    frame.to_csv(path, index=False)


def _spec(pool, *, stream, lab_experiments=14, **space):
    return small_spec(BUCHWALD_SPEC, lab_experiments=lab_experiments, space__pool=str(pool),
                      space__columns=["temperature_c", "time_h", "equiv", "solvent"], space__stream=stream,
                      lab__oracle_column="yield", **{f"space__{k}": v for k, v in space.items()})


@pytest.mark.parametrize("features", ["parameters", "columns"])
def test_a_streamed_pool_answers_as_the_in_memory_pool(tmp_path, features):
    """Same candidates in the same order, same ids, features, value columns and skipped rows, with replicates and a
    bad row in the file."""
    frame = pd.read_csv(BH_DATA)[[*REAGENTS, "yield"]]
    frame["T"] = np.round(np.random.default_rng(1).uniform(20, 100, len(frame)), 1)
    frame = pd.concat([frame, frame.iloc[:40]], ignore_index=True)  # replicates agree, so they merge
    frame.loc[7, "Base_SMILES"] = None
    frame.to_csv(tmp_path / "pool.csv", index=False)
    pools = {}
    for stream in (True, False):
        spec = small_spec(BUCHWALD_SPEC, space__pool=str(tmp_path / "pool.csv"), space__columns=[*REAGENTS, "T"],
                          space__stream=stream, space__features=features, space__on_bad_rows="skip")
        pools[stream] = load_pool(spec)
    streamed, held = pools[True], pools[False]
    assert isinstance(streamed, CompactPool) and not isinstance(held, CompactPool)
    assert len(streamed) == len(held) == len(frame) - 40  # the bad row has a good replicate
    assert list(streamed.ids) == held.ids
    assert streamed.space == held.space
    assert streamed.skipped_rows == held.skipped_rows == [
        "line 9: Base_SMILES is empty (write none for an absent component)"]
    assert np.array_equal(np.asarray(streamed.features), held.features)
    assert np.array_equal(streamed.features[[5, 2, 5]], held.features[[5, 2, 5]])
    for name in ("yield", "T"):
        assert np.array_equal(streamed.columns[name], held.columns[name])
    for row in (0, 17, len(held) - 1):
        assert streamed.candidates[row] == held.candidates[row]
        assert streamed.index[held.ids[row]] == row
        assert streamed.column("yield")[held.ids[row]] == held.column("yield")[held.ids[row]]
    assert "cond-0000000000000000" not in streamed.index


def test_conflicting_replicates_are_the_same_bad_rows_streamed(tmp_path):
    _design_table(tmp_path / "pool.csv", 50)
    frame = pd.read_csv(tmp_path / "pool.csv")
    repeat = frame.iloc[[3]].assign(**{"yield": frame["yield"].iloc[3] + 1})
    pd.concat([frame, repeat]).to_csv(tmp_path / "pool.csv", index=False)
    messages = {}
    for stream in (True, False):
        with pytest.raises(SetupError) as caught:
            load_pool(_spec(tmp_path / "pool.csv", stream=stream))
        messages[stream] = str(caught.value)
    assert messages[True] == messages[False]
    assert "line 52" in messages[True] and "repeats line 5" in messages[True]


def test_the_stream_setting(tmp_path):
    _design_table(tmp_path / "pool.csv", 30)
    assert not should_stream(_spec(tmp_path / "pool.csv", stream="auto"))  # 30 rows fit in memory
    assert should_stream(_spec(tmp_path / "pool.csv", stream=True))
    molecules = small_spec(space__stream=True)
    with pytest.raises(SetupError, match="streams conditions pools"):
        should_stream(molecules)


def test_streamed_batches_equal_whole_pool_batches_with_pending_prior_and_target():
    from orchestrator.policy.planners.acquisition import select_batch
    from orchestrator.policy.planners.acquisition_stream import select_batch_streamed
    from orchestrator.policy.planners.surrogate import GPSurrogate

    rng = np.random.default_rng(3)
    X = rng.uniform(size=(3000, 3))
    y_all = np.sin(5 * X[:, 0]) + X[:, 1] ** 2 - X[:, 2]
    train, pending = np.arange(12), np.arange(12, 15)
    prior = 0.3 * X[:, 1]
    surrogate = GPSurrogate.fit(X[train], y_all[train] - prior[train], n_steps=40)
    available = np.arange(15, 3000)
    for target in (None, 0.4):
        whole, whole_values = select_batch(surrogate, X[train], y_all[train] - prior[train], X[available], 6,
                                           pending=X[pending], offset_pool=prior[available],
                                           offset_pending=prior[pending], incumbent=float(np.max(y_all[train])),
                                           target=target)
        rows, values = select_batch_streamed(surrogate, X[train], y_all[train] - prior[train], X, available, 6,
                                             pending=X[pending], prior=prior, prior_pending=prior[pending],
                                             incumbent=float(np.max(y_all[train])), target=target,
                                             chunk_bytes=200 * 3 * 8)
        assert rows.tolist() == available[whole].tolist()
        assert np.allclose(values, whole_values)


def test_a_shortlist_that_cannot_certify_its_batch_says_so(caplog):
    from orchestrator.policy.planners.acquisition_stream import select_batch_streamed
    from orchestrator.policy.planners.surrogate import GPSurrogate

    X = np.linspace(0.0, 1.0, 3000)[:, None]
    surrogate = GPSurrogate.fit(X[[0, 1500, 2999]], np.array([0.0, 0.5, 0.0]), n_steps=30)
    rows, _ = select_batch_streamed(surrogate, X[[0, 1500, 2999]], np.array([0.0, 0.5, 0.0]), X,
                                    np.arange(1, 2999), 4, target=1.0, shortlist_bytes=20 * 8)
    assert len(set(rows.tolist())) == 4
    assert "could not certify" in caplog.text


@pytest.fixture(scope="module")
def design_campaigns(tmp_path_factory):
    """One 20,000-row design table run twice on the same seed: held in memory, then streamed."""
    folder = tmp_path_factory.mktemp("design")
    _design_table(folder / "pool.csv", 20_000)
    runs = {}
    for stream in (False, True):
        spec = _spec(folder / "pool.csv", stream=stream)
        with Campaign.start(spec, db=folder / f"{stream}.db", campaign_id=f"design-{stream}") as campaign:
            summary = campaign.run()
            events = campaign.ledger.events(f"design-{stream}")
            runs[stream] = {"summary": summary, "events": events, "is_identical": verify(
                campaign.ledger, f"design-{stream}").is_identical, "pool": campaign.ctx.pool}
    return runs


def test_streamed_and_in_memory_campaigns_pick_the_same_candidates(design_campaigns):
    held, streamed = design_campaigns[False], design_campaigns[True]
    assert isinstance(streamed["pool"], CompactPool) and not isinstance(held["pool"], CompactPool)

    def picks(run, kind):
        return [(e.payload["candidate_id"], e.payload.get("arm")) for e in run["events"] if e.type == kind]

    assert picks(streamed, "Proposed") == picks(held, "Proposed")
    acquisitions = [e.payload["acquisition"] for e in streamed["events"] if e.type == "Proposed"]
    held_acquisitions = [e.payload["acquisition"] for e in held["events"] if e.type == "Proposed"]
    assert sum(a is not None for a in acquisitions) >= 3  # bo planned from the surrogate, not only the initial design
    assert np.allclose([a for a in acquisitions if a is not None], [a for a in held_acquisitions if a is not None])
    assert [e.payload["job_key"] for e in streamed["events"] if e.type == "Dispatched"] == \
           [e.payload["job_key"].replace("design-False", "design-True")
            for e in held["events"] if e.type == "Dispatched"]
    assert streamed["summary"]["best"]["value"] == held["summary"]["best"]["value"]
    assert streamed["summary"]["n_lab"] == 14


def test_a_streamed_campaign_replays_exactly(design_campaigns):
    assert design_campaigns[True]["is_identical"]


def test_bad_rows_of_a_streamed_pool_are_reported_before_the_first_dispatch(tmp_path):
    _design_table(tmp_path / "pool.csv", 400, bad_line=250)
    with pytest.raises(SetupError, match="line 250: time_h is empty"):
        Campaign.start(_spec(tmp_path / "pool.csv", stream=True), db=tmp_path / "refused.db", campaign_id="refused")
    spec = _spec(tmp_path / "pool.csv", stream=True, lab_experiments=4, on_bad_rows="skip")
    with Campaign.start(spec, db=tmp_path / "skip.db", campaign_id="skip") as campaign:
        campaign.run()
        events = campaign.ledger.events("skip")
    started = next(k for k, e in enumerate(events) if e.type == "CampaignStarted")
    first_dispatch = next(k for k, e in enumerate(events) if e.type == "Dispatched")
    assert started < first_dispatch
    assert events[started].payload["pool_rows_skipped"] == [
        "line 250: time_h is empty (write none for an absent component)"]


@pytest.mark.parametrize("kernel", ["matern52", "tanimoto"])
def test_batches_from_fingerprint_blocks_equal_the_dense_batches(tmp_path, kernel):
    """Over a compact pool the bound pass reads per-reagent tables (no dense rows); the batch is the dense one's."""
    from orchestrator.policy.planners.acquisition import select_batch
    from orchestrator.policy.planners.acquisition_stream import select_batch_streamed
    from orchestrator.policy.planners.surrogate import GPSurrogate

    spec = small_spec(BUCHWALD_SPEC, space__stream=True, space__features="columns")
    pool = load_pool(spec)
    X = np.asarray(pool.features)
    y = pool.columns["yield"]
    train = np.arange(0, 400, 20)
    surrogate = GPSurrogate.fit(X[train], y[train], kernel=kernel, n_steps=30)
    available = np.setdiff1d(np.arange(len(pool)), np.arange(0, 420, 20))
    pending = X[[400]]
    whole, _ = select_batch(surrogate, X[train], y[train], X[available], 5, pending=pending)
    rows, _ = select_batch_streamed(surrogate, X[train], y[train], pool.features, available, 5, pending=pending)
    assert rows.tolist() == available[whole].tolist()
