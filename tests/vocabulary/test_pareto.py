"""Pareto math: dominance, hypervolume (against brute force and known values), its improvement, trade-off scalars."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from vocabulary.domain import SetupError
from vocabulary.pareto import (
    HypervolumeCells,
    hypervolume,
    infer_reference_point,
    non_dominated,
    reference_in_units,
    reference_in_utility,
    tradeoff_utilities,
    utility_matrix,
)


def _objective(direction: str, target: float | None = None, weight: float = 1.0, bounds=None):
    return SimpleNamespace(property=f"p_{direction}", direction=direction, target=target, weight=weight,
                           bounds=bounds)


def _monte_carlo_volume(front: np.ndarray, reference: np.ndarray, n: int = 400_000, seed: int = 0) -> float:
    """Brute force: the share of uniform points in the reference..ideal box that some front point dominates."""
    rng = np.random.default_rng(seed)
    top = front.max(axis=0)
    z = reference + rng.random((n, reference.size)) * (top - reference)
    dominated = np.zeros(n, dtype=bool)
    for point in front:
        dominated |= (z <= point).all(axis=1)
    return float(dominated.mean() * np.prod(top - reference))


def _brute_non_dominated(Y: np.ndarray) -> np.ndarray:
    keep = []
    for i, row in enumerate(Y):
        if np.isnan(row).any():
            keep.append(False)
            continue
        others = np.delete(Y, i, axis=0)
        others = others[~np.isnan(others).any(axis=1)]
        keep.append(not ((others >= row).all(axis=1) & (others > row).any(axis=1)).any())
    return np.array(keep)


@pytest.mark.parametrize("m", [2, 3, 4])
def test_non_dominated_matches_brute_force(m):
    rng = np.random.default_rng(m)
    Y = np.round(rng.random((60, m)) * 5) / 5  # ties on purpose
    Y[3, 1] = np.nan
    np.testing.assert_array_equal(non_dominated(Y), _brute_non_dominated(Y))


def test_known_hypervolumes():
    assert hypervolume(np.array([[3.0, 1.0], [2.0, 2.0], [1.0, 3.0]]), np.zeros(2)) == pytest.approx(6.0)
    # a 3-D staircase: unit cube plus three unit bars = 4, plus a dominated and a below-reference point
    Y = np.array([[2.0, 1.0, 1.0], [1.0, 2.0, 1.0], [1.0, 1.0, 2.0], [0.5, 0.5, 0.5], [5.0, 5.0, -1.0]])
    assert hypervolume(Y, np.zeros(3)) == pytest.approx(4.0)
    assert hypervolume(np.zeros((0, 2)), np.zeros(2)) == 0.0
    assert hypervolume(np.array([[4.0]]), np.array([1.0])) == pytest.approx(3.0)


@pytest.mark.parametrize("m", [2, 3, 4])
def test_hypervolume_matches_monte_carlo(m):
    rng = np.random.default_rng(10 + m)
    Y = rng.random((25, m))
    Y = Y / np.linalg.norm(Y, axis=1, keepdims=True)  # points on a sphere: a front with many members
    reference = np.full(m, -0.1)
    exact = hypervolume(Y, reference)
    assert exact == pytest.approx(_monte_carlo_volume(Y[non_dominated(Y)], reference), rel=0.01)


@pytest.mark.parametrize("m", [2, 3])
def test_improvement_is_the_volume_a_point_adds(m):
    rng = np.random.default_rng(20 + m)
    front = rng.random((12, m))
    reference = np.zeros(m)
    cells = HypervolumeCells.from_front(front, reference)
    points = rng.random((40, m)) * 1.2
    base = hypervolume(front, reference)
    expected = [hypervolume(np.vstack([front, p]), reference) - base for p in points]
    np.testing.assert_allclose(cells.improvement(points), expected, atol=1e-12)
    assert cells.volume == pytest.approx(base)
    # vectorised over leading axes, and a point below the front or with NaN improves nothing
    np.testing.assert_allclose(cells.improvement(points.reshape(4, 10, m)), np.reshape(expected, (4, 10)))
    assert cells.improvement(np.vstack([front[:1] * 0.99, np.full(m, np.nan)])).tolist() == [0.0, 0.0]


def test_improvement_over_an_empty_front_is_the_box_above_the_reference():
    cells = HypervolumeCells.from_front(np.zeros((0, 3)), np.array([-1.0, -1.0, -1.0]))
    assert cells.improvement(np.array([1.0, 1.0, 1.0])) == pytest.approx(8.0)


def test_utility_matrix_and_reference_round_trip():
    objectives = [_objective("maximize"), _objective("minimize"), _objective("target", target=5.0)]
    values = np.array([[1.0, 2.0, 6.5], [np.nan, 3.0, 4.0]])
    utilities = utility_matrix(objectives, values)
    np.testing.assert_array_equal(utilities, [[1.0, -2.0, -1.5], [np.nan, -3.0, -1.0]])
    reference = reference_in_utility(objectives, [0.0, 10.0, 8.0])
    np.testing.assert_array_equal(reference, [0.0, -10.0, -3.0])
    np.testing.assert_array_equal(reference_in_units(objectives, reference), [0.0, 10.0, 8.0])
    with pytest.raises(SetupError, match="one per objective"):
        reference_in_utility(objectives, [0.0, 1.0])


def test_inferred_reference_lies_below_the_front():
    Y = np.array([[0.0, 4.0], [2.0, 2.0], [4.0, 0.0], [-5.0, -5.0]])  # the last row is dominated: not the nadir
    np.testing.assert_allclose(infer_reference_point(Y), [-0.4, -0.4])
    single = infer_reference_point(np.array([[2.0, 0.0]]))
    assert (single < [2.0, 0.0]).all()
    with pytest.raises(SetupError, match="reference_point"):
        infer_reference_point(np.full((2, 2), np.nan))


def test_tradeoff_scalars():
    values = np.array([[8.0, 20.0], [4.0, 80.0], [np.nan, 1.0]])
    maximize = _objective("maximize", bounds=(0.0, 10.0), weight=2.0)
    minimize = _objective("minimize", bounds=(100.0, 0.0))
    desirability = SimpleNamespace(objective_list=[maximize, minimize], tradeoff_method="desirability")
    scalar = tradeoff_utilities(desirability, values)
    np.testing.assert_allclose(scalar[:2], [(0.8**2 * 0.8) ** (1 / 3), (0.4**2 * 0.2) ** (1 / 3)])
    assert np.isnan(scalar[2])
    weighted = SimpleNamespace(objective_list=[maximize, _objective("minimize")], tradeoff_method="weighted_sum")
    np.testing.assert_allclose(tradeoff_utilities(weighted, values)[:2], [2 * 0.8 - 20.0, 2 * 0.4 - 80.0])
    pareto = SimpleNamespace(objective_list=[_objective("maximize"), _objective("minimize")], tradeoff_method="pareto")
    # the balanced compromise scores above both extremes, and a dominated point below what dominates it
    scores = tradeoff_utilities(pareto, np.array([[10.0, 100.0], [0.0, 0.0], [5.0, 50.0], [4.0, 60.0]]))
    assert scores[2] > max(scores[0], scores[1]) and scores[3] < scores[2]
    with pytest.raises(SetupError, match="bounds"):
        tradeoff_utilities(SimpleNamespace(objective_list=[_objective("maximize"), minimize],
                                           tradeoff_method="desirability"), values)
