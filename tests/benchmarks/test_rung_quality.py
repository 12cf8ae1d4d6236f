"""The synthetic rungs of benchmarks/rung_quality.py have the quality they claim, and the verdicts judge the promises."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from benchmarks.rung_quality import RUNG_COLUMN, synthetic_pool, verdicts


@pytest.fixture()
def source(tmp_path):
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"smiles": [f"C{'C' * k}O" for k in range(400)], "y": rng.normal(2.0, 3.0, 400)})
    frame.loc[5, "y"] = np.nan  # no lab value: left out, as the bench leaves it out
    frame = pd.concat([frame, frame.iloc[[7]].assign(y=frame.loc[7, "y"] + 1.0)])  # a replicate of row 7
    path = tmp_path / "pool.csv"
    frame.to_csv(path, index=False)
    return path


@pytest.mark.parametrize(("model", "q", "low", "high"), [("same unit", 0.25, 0.93, 0.99),
                                                          ("other unit", 0.5, 0.83, 0.93),
                                                          ("noise", 1.0, -0.15, 0.15)])
def test_rung_quality_is_set_by_construction(source, tmp_path, model, q, low, high):
    before = source.read_bytes()
    rho = synthetic_pool(source, ["smiles"], "y", model, q, seed=1, out=tmp_path / "out.csv")
    out = pd.read_csv(tmp_path / "out.csv")
    assert low <= rho <= high
    assert source.read_bytes() == before
    assert out["y"].notna().all() and len(out) == 400  # 399 with a value, plus the replicate
    replicate = out[out["smiles"] == "C" * 8 + "O"]  # row 7 and its replicate
    assert len(replicate) == 2 and replicate[RUNG_COLUMN].nunique() == 1


def test_other_unit_rung_is_biased_but_ranks_alike(source, tmp_path):
    synthetic_pool(source, ["smiles"], "y", "other unit", 0.25, seed=1, out=tmp_path / "out.csv")
    out = pd.read_csv(tmp_path / "out.csv")
    slope, intercept = np.polyfit(out["y"], out[RUNG_COLUMN], 1)
    assert slope == pytest.approx(0.6, abs=0.05)
    assert intercept < -2.0  # the offset that makes the raw order near a target wrong


def _cell(spearman, bo, sf, cheap):
    def summary(per_seed):
        one = {"median": float(np.median(per_seed)), "per_seed": per_seed}
        return {"experiments_to_top1": one, "experiments_to_top5": one}

    return {"spearman": spearman, "arms": {"bo": summary(bo), "bo-sf": summary(sf), "cheap-first": summary(cheap)}}


def test_verdicts_judge_only_the_promises_made_seed_by_seed():
    assert verdicts(_cell(0.9, [6, 6], [20, 20], [6, 6])) == ("ok", "ok")
    assert verdicts(_cell(0.9, [12, 12], [20, 20], [6, 6])) == ("2.00×", "ok")
    assert verdicts(_cell(0.0, [30, 30], [20, 20], [6, 6])) == ("—", "1.50×")  # no promise without information
    # the same medians, but bo loses on the seed it is paired with: the paired ratio sees it, the medians would not
    assert verdicts(_cell(0.0, [4, 40], [40, 4], [6, 6]))[1] == "ok"
    assert verdicts(_cell(0.0, [8, 40], [40, 4], [6, 6]))[1] == "1.41×"


def test_the_noise_table_gives_each_ratio_with_an_interval_that_narrows_with_seeds():
    from benchmarks.rung_quality import markdown, paired_interval

    few = _cell(0.0, [10, 30, 20, 15], [20, 15, 20, 30], [51] * 4)
    ratio, low, high = paired_interval(few, "bo", "bo-sf")
    assert low < ratio < high and ratio == pytest.approx(float(np.exp(np.mean(np.log([0.5, 2.0, 1.0, 0.5])))))
    many = _cell(0.0, [10, 30, 20, 15] * 25, [20, 15, 20, 30] * 25, [51] * 100)
    assert paired_interval(many, "bo", "bo-sf")[0] == pytest.approx(ratio)
    assert paired_interval(many, "bo", "bo-sf")[2] - paired_interval(many, "bo", "bo-sf")[1] < (high - low) / 3
    results = {"arms": ["bo", "bo-sf", "cheap-first"], "code_commit": "abc1234", "date": "2026-11-29",
               "cells": [],
               "noise_seeds": 100, "noise_cells": [dict(many, problem="esol maximise", model="noise", q=1.0)]}
    text = markdown(results)
    assert "## Pure-noise rungs over 100 seeds" in text
    row = next(line for line in text.splitlines() if line.startswith("| esol maximise | 17.5 | 20 |"))
    assert f"{ratio:.2f}×" in row


def test_a_gap_empties_that_share_of_candidates_and_keeps_the_rest_of_the_draw(source, tmp_path):
    """The gap rows reuse the gap-free draw (same seed) for the cells they keep, so the two tables compare rungs that
    differ only by the empty cells; ρ is over the cells that hold a value."""
    whole = synthetic_pool(source, ["smiles"], "y", "same unit", 0.5, seed=3, out=tmp_path / "whole.csv")
    gappy = synthetic_pool(source, ["smiles"], "y", "same unit", 0.5, seed=3, out=tmp_path / "gappy.csv", gap=0.3)
    a, b = pd.read_csv(tmp_path / "whole.csv"), pd.read_csv(tmp_path / "gappy.csv")
    empty = b[RUNG_COLUMN].isna()
    assert 0.2 < empty.mean() < 0.4 and np.isfinite(gappy) and abs(gappy - whole) < 0.1
    assert np.allclose(a.loc[~empty, RUNG_COLUMN], b.loc[~empty, RUNG_COLUMN])
    assert b[b["smiles"] == "C" * 8 + "O"][RUNG_COLUMN].isna().nunique() == 1  # a replicate shares its empty cell


def test_the_gap_table_sets_each_row_beside_the_same_rung_without_gaps():
    from benchmarks.rung_quality import markdown

    base = dict(_cell(0.9, [6, 6], [20, 20], [6, 6]), problem="esol maximise", model="same unit", q=0.5)
    gappy = dict(_cell(0.9, [12, 12], [20, 20], [6, 6]), problem="esol maximise", model="same unit", q=0.5)
    text = markdown({"arms": ["bo", "bo-sf", "cheap-first"], "code_commit": "abc1234", "date": "2026-11-29",
                     "cells": [base], "gap_share": 0.3, "gap_code_commit": "def5678", "gap_cells": [gappy]})
    assert "## Rungs with 30% of their cells empty" in text and "def5678" in text
    row = [line for line in text.splitlines() if line.startswith("| esol maximise | same unit")][-1]
    assert "2.00× (1.00×)" in row and "0.60× (0.30×)" in row
