"""The gymnasium adapter: ``CampaignGymEnv``, a ``gymnasium.Env`` over ``CampaignEnvironment`` for code policies.

- Action: ``Discrete(n_offer)``, the offer slot to send to the lab (one lab slot per step: ``batch_size = 1``). An
  index past the end of a short offer is refused like any invalid action (penalty, same situation). The action
  space stays discrete over the offered candidates even in an open space: new SMILES or formulas are proposed
  through the core's ``ProposeAction.structures`` (the text and tool adapters), not through this adapter.
- Observation: a ``Dict`` of float32 arrays over the offer: ``mean`` and ``sd`` (the surrogate's, objective unit,
  0 before it exists), ``mask`` (1 where a candidate is on offer), ``features`` (the pool's feature rows), and
  ``has_surrogate``, ``budget_left`` (share of the lab budget) and ``best`` (the best lab value so far, 0 before any).
  With several objectives ``best`` has one entry per objective (each the best so far in its own direction, its
  unit) and ``hypervolume`` is the measured front's (0 before any); ``mean`` and ``sd`` stay the surrogate's.
- ``reset(seed, options)`` passes ``options`` as the episode's task (``lab_budget``, ``success_quantile``, …);
  ``render()`` returns the text observation (``render_mode="ansi"``).

Registered with gymnasium as ``closedloop/Campaign-v0`` when ``closedloop.envs`` is imported; this module imports
gymnasium, so ``pip install "closedloop[rl]"``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from orchestrator.environment.core import CampaignEnvironment
from orchestrator.environment.observation import EnvironmentObservation
from vocabulary.domain import import_optional

gym = import_optional("gymnasium", "rl", "the gymnasium environment")
spaces = gym.spaces

__all__ = ["CampaignGymEnv"]


def _best(values: list[float | None], objective: Any) -> float:
    """The best of ``values`` in the objective's direction (a target: the smallest distance to it); 0 before any."""
    values = [v for v in values if v is not None and np.isfinite(v)]
    if not values:
        return 0.0
    if objective.direction == "maximize":
        return max(values)
    if objective.direction == "minimize":
        return min(values)
    return min(abs(v - objective.target) for v in values)


class CampaignGymEnv(gym.Env):
    """A campaign as a gymnasium environment (see the module docstring)."""

    metadata = {"render_modes": ["ansi"]}

    def __init__(self, spec: Any, *, n_offer: int = 16, db: Any = ":memory:", render_mode: str | None = None,
                 invalid_penalty: float = 0.1, max_steps: int | None = None, **task: Any):
        self.core = CampaignEnvironment(spec if not isinstance(spec, str) else Path(spec), db=db, n_offer=n_offer,
                                        invalid_penalty=invalid_penalty, max_steps=max_steps)
        self.task = {"batch_size": 1, **task}
        self.render_mode = render_mode
        from orchestrator.space.pool import load_pool

        self._pool = load_pool(self.core.base_spec)
        n_features = int(np.asarray(self._pool.features).shape[1])
        spec = self.core.base_spec
        self._objectives = list(spec.objective_list) if spec.is_multi_objective else []
        box = lambda *shape: spaces.Box(-np.inf, np.inf, shape=shape, dtype=np.float32)  # noqa: E731
        self.observation_space = spaces.Dict({
            "mean": box(n_offer), "sd": spaces.Box(0.0, np.inf, shape=(n_offer,), dtype=np.float32),
            "mask": spaces.Box(0.0, 1.0, shape=(n_offer,), dtype=np.float32),
            "features": box(n_offer, n_features),
            "has_surrogate": spaces.Box(0.0, 1.0, shape=(1,), dtype=np.float32),
            "budget_left": spaces.Box(0.0, 1.0, shape=(1,), dtype=np.float32),
            "best": box(max(1, len(self._objectives))),
            **({"hypervolume": spaces.Box(0.0, np.inf, shape=(1,), dtype=np.float32)} if self._objectives else {}),
        })
        self.action_space = spaces.Discrete(n_offer)
        self._obs: EnvironmentObservation | None = None

    def _arrays(self, obs: EnvironmentObservation) -> dict[str, np.ndarray]:
        n = self.action_space.n
        mean, sd, mask = (np.zeros(n, dtype=np.float32) for _ in range(3))
        features = np.zeros(self.observation_space["features"].shape, dtype=np.float32)
        pool = self.core.campaign.ctx.pool
        for k, c in enumerate(obs.offer[:n]):
            mask[k] = 1.0
            mean[k] = c.mean if c.mean is not None else 0.0
            sd[k] = c.sd if c.sd is not None else 0.0
            features[k] = np.asarray(pool.features[pool.index[c.candidate_id]], dtype=np.float32)
        if self._objectives:
            best = [_best([r.values.get(o.property) for r in obs.lab_results], o) for o in self._objectives]
        else:
            best = [_best([r.value for r in obs.lab_results], obs.objective)]
        b = obs.budget
        arrays = {"mean": mean, "sd": sd, "mask": mask, "features": features,
                  "has_surrogate": np.asarray([float(any(c.mean is not None for c in obs.offer))], dtype=np.float32),
                  "budget_left": np.asarray([b.lab_experiments_left / b.lab_experiments], dtype=np.float32),
                  "best": np.asarray(best, dtype=np.float32)}
        if self._objectives:
            hypervolume = obs.front.hypervolume if obs.front is not None else 0.0
            arrays["hypervolume"] = np.asarray([hypervolume], dtype=np.float32)
        return arrays

    def action_masks(self) -> np.ndarray:
        """Which actions name a candidate on offer now (int8, for masked sampling)."""
        return self._arrays(self._obs)["mask"].astype(np.int8)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        if seed is None:
            seed = int(self.np_random.integers(2**31 - 1))
        self._obs = self.core.reset(seed=seed, **{**self.task, **(options or {})})
        return self._arrays(self._obs), {}  # the campaign id (random per episode) is in ``core.state``

    def step(self, action):
        k = int(action)
        offer = self._obs.offer
        label = offer[k].label if 0 <= k < len(offer) else f"o{k:02d}"
        result = self.core.step({"type": "propose", "candidate_ids": [label],
                                 "hypothesis": f"offer slot {k}, chosen by a code policy"})
        self._obs = result.observation
        return (self._arrays(self._obs), float(result.reward), bool(result.terminated), bool(result.truncated),
                {**{k: v for k, v in result.info.items() if k != "campaign_id"}, "error": self._obs.error})

    def render(self):
        return self._obs.render() if self._obs is not None else ""

    def close(self):
        self.core.close()
