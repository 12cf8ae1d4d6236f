"""A two-objective campaign on a tiny inline conditions pool, shared by the tests of rewards, the environment,
exports and replay: maximise ``a``, minimise ``b`` (truth in the pool's columns), on the simulated lab."""

from __future__ import annotations

from typing import Any


def pool_rows() -> list[dict[str, float]]:
    """12 conditions: ``a`` rises with x, ``b`` falls with it, with a bump every third row (so some are dominated)."""
    rows = []
    for i in range(12):
        x = i / 11
        rows.append({"x": round(x, 3), "a": round(10 * x, 3), "b": round(10 * (1 - x) ** 2 + (i % 3), 3)})
    return rows


def two_objective_spec(**overrides: Any):
    """The campaign spec (budget 8, batch 2, bo with a random control); ``overrides`` update top-level sections."""
    from orchestrator.spec import CampaignSpec

    data: dict[str, Any] = {
        "campaign": {"name": "two-objectives", "kind": "conditions", "seed": 0},
        "objective": [{"property": "a", "direction": "maximize", "column": "a"},
                      {"property": "b", "direction": "minimize", "column": "b"}],
        "space": {"inline": pool_rows(), "columns": ["x"]},
        "lab": {"driver": "simlab", "noise_sd": 0.0},
        "budget": {"lab_experiments": 8},
        "planner": {"main": "bo", "control": "random", "batch_size": 2, "n_initial": 2},
        "stop": {"on_target": False},
    }
    for section, value in overrides.items():
        data[section] = {**data.get(section, {}), **value} if isinstance(value, dict) else value
    return CampaignSpec.model_validate(data)
