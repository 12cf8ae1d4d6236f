"""The environment's tool calls and written structures: run a rung, query the surrogate, query the ledger, and
check a structure (SMILES or formula) a policy writes in an open space.

``EnvironmentTools`` is a mixin of ``core.CampaignEnvironment``: it reads the episode's live campaign
(``self.campaign``, ``self.spec``, ``self._arm``) and its read of the ledger (``self._read``, ``self._last``), and
answers each call as a plain dict for the observation's ``tool_result``. A refused call raises ``InvalidAction``
naming what is wrong and how to fix it; the episode goes on.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from orchestrator.environment.actions import (
    InvalidAction,
    QueryLedgerAction,
    QuerySurrogateAction,
    RunRungAction,
)
from orchestrator.environment.arm import ARM
from orchestrator.environment.observation import NewStructures
from orchestrator.space.pool import describe
from vocabulary.domain import InvalidCandidate, parse_candidate
from vocabulary.events import Proposed, Simulated

__all__ = ["EnvironmentTools"]


class EnvironmentTools:
    """Tool calls and structure checks of a ``CampaignEnvironment`` episode."""

    def _structure(self, text: str):
        """(candidate, is_new) for a proposal's written structure: canonical, within the open space's limits and
        untested; ``InvalidAction`` naming what is wrong and the fix otherwise."""
        candidate, row = self._parse_structure(text)
        if row is None:
            return candidate, True
        if not np.any(np.asarray(self._arm.context.available, dtype=int) == row):
            raise InvalidAction(f"structure {text[:200]!r} ({candidate.id}) was already sent to the lab or "
                                "rejected; propose an untested candidate")
        return candidate, False

    def _parse_structure(self, text: str):
        """(candidate, its pool row or None) for a written structure, checked as the campaign checks the llm arm's
        (the domain's parser, then the open space's limits); ``InvalidAction`` naming what is wrong otherwise. A
        structure already in the pool is that pool candidate."""
        rules = self._new_structures()
        if not rules.is_open:
            raise InvalidAction(f"structure {text[:200]!r} refused: {rules.reason}")
        pool = self.campaign.ctx.pool
        try:
            candidate = parse_candidate(self.spec.campaign.kind, text.strip(), pool.space)
        except InvalidCandidate as exc:
            syntax = "SMILES" if rules.syntax == "smiles" else "formula"
            raise InvalidAction(f"structure {text[:200]!r} is not a valid {syntax}: {exc}") from None
        from orchestrator.policy.generation import constraint_error

        error = constraint_error(self.spec.space, candidate)
        if error:
            raise InvalidAction(f"structure {text[:200]!r} is outside the open space: {error}")
        row = pool.index.get(candidate.id)
        if row is None:
            return candidate, None
        return pool.candidates[row], row

    def _tool_candidates(self, refs: list[str], structures: list[str]) -> list:
        """The candidates a tool call names, pool members first: offer labels or pool ids, then written structures
        (open spaces), each once; ``InvalidAction`` for an unknown name, a bad structure or a repeat."""
        pool = self.campaign.ctx.pool
        named = [pool.get(self._resolve(ref, offer_only=False)) for ref in refs]
        for text in structures:
            candidate, _ = self._parse_structure(text)
            self._outside[candidate.id] = candidate
            named.append(candidate)
        ids = [c.id for c in named]
        if len(set(ids)) != len(ids):
            raise InvalidAction(f"the call names a candidate twice ({[*refs, *structures]}); name each once")
        return named

    def _new_structures(self) -> NewStructures:
        """Whether this episode's proposals may write new candidates, and why not when they may not."""
        spec = self.spec
        kind, space = spec.campaign.kind, spec.space
        if kind == "conditions":
            return NewStructures(is_open=False, reason="a conditions campaign's space is its grid of parameters; "
                                                        "propose from the offer")
        if not space.generate:
            return NewStructures(is_open=False, reason=(
                "the design space is a fixed pool (space.generate = false), and the lab measures only its members; "
                "propose from the offer"))
        return NewStructures(is_open=True, syntax="smiles" if kind == "molecule" else "formula",
                             max_heavy_atoms=space.max_heavy_atoms if kind == "molecule" else None,
                             max_atoms=space.max_atoms if kind == "material" else None,
                             elements=tuple(space.elements) if space.elements else None)

    def _run_rung(self, action: RunRungAction) -> dict[str, Any]:
        from orchestrator.loop.rung_digest import rung_digest
        from orchestrator.loop.screening import run_rung

        ctx = self.campaign.ctx
        rungs = {r.name: r for r in ctx.rungs}
        if action.rung not in rungs:
            raise InvalidAction(f"rung {action.rung!r} is not on this campaign's ladder; use one of {sorted(rungs)}"
                                if rungs else "this campaign has no rungs to run; propose or query the surrogate")
        rung = rungs[action.rung]
        [candidate] = self._tool_candidates([action.candidate_id] if action.candidate_id else [],
                                            [action.structure] if action.structure else [])
        if any(r.rung == action.rung and r.candidate_id == candidate.id for r in self._read.rung_results):
            raise InvalidAction(f"rung {action.rung!r} already ran on {candidate.id} ({describe(candidate)}) in this "
                                "episode; its result is in the rung results (query_ledger 'rung_results')")
        budget_s = self.spec.budget.compute_seconds
        if budget_s is not None:
            # charged like the screen's rung reads: the campaign's compute budget, from the rung's cost model
            left_s = budget_s - rung_digest(ctx).compute_s_before(self._iteration() + 1)
            cost_s = float(rung.simulator.cost_model(candidate))
            if cost_s > left_s:
                raise InvalidAction(f"rung {action.rung!r} costs {cost_s:.4g} s of compute on {candidate.id} and "
                                    f"{max(left_s, 0.0):.4g} s are left; use a cheaper rung or propose")
        observation = run_rung(ctx, rung, [candidate])[0]
        iteration = self._iteration()
        ctx.ledger.append(ctx.campaign_id, Simulated(iteration=iteration, candidate_id=candidate.id, rung=action.rung,
                                                     observation=observation.model_dump(mode="json")),
                          key=f"it{iteration}:env-rung:{action.rung}:{candidate.id}", actor=f"policy:{ARM}")
        return {"rung": action.rung, "candidate_id": candidate.id, "text": describe(candidate),
                "is_in_pool": candidate.id in ctx.pool.index, "status": observation.status,
                "properties": {k: float(v) for k, v in observation.properties.items()},
                **({"reason": observation.reason} if observation.reason else {})}

    def _query_surrogate(self, action: QuerySurrogateAction) -> dict[str, Any]:
        candidates = self._tool_candidates(action.candidate_ids, action.structures)
        predictions = self._predict(candidates)
        if predictions is None:
            return {"note": "no surrogate yet: it is fitted after two lab results", "predictions": []}
        return {"predictions": [{"candidate_id": c.id, "text": describe(c), "mean": m, "sd": s}
                                for c, (m, s) in zip(candidates, predictions, strict=True)]}

    def _query_ledger(self, action: QueryLedgerAction) -> dict[str, Any]:
        """The episode's own records from the ledger, newest last: what was proposed, measured and computed."""
        ctx = self.campaign.ctx
        pool = ctx.pool
        if action.what == "proposals":
            rows = [{"iteration": p["iteration"], "candidate_id": p["candidate_id"],
                     "text": describe(pool.get(p["candidate_id"])), "hypothesis": p.get("hypothesis", ""),
                     "expected": p.get("expected")}
                    for p in (e.payload for e in ctx.ledger.events(ctx.campaign_id, types=[Proposed.type]))]
            return {"what": "proposals", "n_total": len(rows), "records": rows[-action.limit:]}
        observation = self._last
        if action.what == "lab_results":
            # ``values`` only where the lab measured several properties, so one objective's answer is as it was
            rows = [r.model_dump(exclude=None if r.values else {"values"}) for r in observation.lab_results]
            return {"what": "lab_results", "n_total": len(rows), "records": rows[-action.limit:]}
        if action.what == "rung_results":
            rows = [r.model_dump() for r in observation.rung_results]
            return {"what": "rung_results", "n_total": len(rows), "records": rows[-action.limit:]}
        values = [r for r in observation.lab_results if r.value is not None]
        objective = self.spec.objective
        best = max(values, key=lambda r: objective.utility(r.value)) if values else None
        return {"what": "summary", "n_proposed": len(ctx.ledger.events(ctx.campaign_id, types=[Proposed.type])),
                "n_lab_results": len(observation.lab_results), "n_lab_failed": len(observation.lab_results) - len(values),
                "n_rung_results": len(observation.rung_results),
                "best": best.model_dump(exclude=None if best.values else {"values"}) if best is not None else None,
                "lab_experiments_left": observation.budget.lab_experiments_left,
                **({"front": observation.front.model_dump() if observation.front is not None else None}
                   if self.spec.is_multi_objective else {})}

    def _planning_tools(self):
        """The llm arm's planning tools on the live context, kept while the graph waits on that context: the GP is
        rebuilt from its recorded hyperparameters once per planning step, not once per offer or query."""
        from orchestrator.policy.planners.llm_tools import PlanningTools

        context = self._arm.context
        if context is None:
            return None
        if self._tools is None or self._tools.context is not context:
            self._tools = PlanningTools(context)
        return self._tools

    def _predict(self, candidates: list) -> list[tuple[float, float]] | None:
        """Surrogate mean and sd (objective unit; several objectives: the trade-off utility) of candidates, from the
        campaign's GP; None before it exists. A candidate outside the pool (a written structure) is featurised as the
        pool's candidates are."""
        from vocabulary.domain import featurise

        tools = self._planning_tools()
        if tools is None or tools.surrogate is None or not candidates:
            return None
        pool = tools.context.pool
        rows = [pool.index.get(c.id) for c in candidates]
        inside = [k for k, row in enumerate(rows) if row is not None]
        outside = [k for k, row in enumerate(rows) if row is None]
        mean, sd = np.zeros(len(candidates)), np.zeros(len(candidates))
        if inside:
            mean[inside], sd[inside] = tools.predict_utilities([rows[k] for k in inside])
        if outside:
            if getattr(tools.surrogate, "pool_prior", None) is not None:
                raise InvalidAction("the surrogate's ladder prior is known only for pool candidates; query offer "
                                    "labels or pool ids")
            X = featurise([candidates[k] for k in outside], pool.space)
            mean[outside], sd[outside] = tools.surrogate.predict(X)
        if self.spec.is_multi_objective:  # the surrogate models the trade-off utility (unitless, higher is better)
            return [(float(m), float(s)) for m, s in zip(mean.tolist(), sd.tolist(), strict=True)]
        objective = self.spec.objective
        sign = -1.0 if objective.direction == "minimize" else 1.0
        out = []
        for m, s in zip(mean.tolist(), sd.tolist(), strict=True):
            # a target objective's utility is −distance; shown as the distance, as the llm arm's tools do
            out.append((float(-m if objective.direction == "target" else sign * m), float(s)))
        return out
