"""The llm arm's tools, built from a ``PlanningContext``: predict, simulate, history, similar and constraints.

Each tool returns a short JSON string, bounded whatever the campaign's length: lists are capped and candidate text
is clipped. Candidates are referred to by shortlist label (``c07``), pool id (InChIKey, reduced formula,
``cond-…``), or their SMILES / formula / conditions text. Values are reported in the objective's unit: the measured
``value`` for maximize/minimize, the ``distance`` from the target for a target objective (lower is better).

The same functions serve two paths: the planner calls them itself and puts their results in the prompt as data
(small models), and ``as_langchain_tools`` hands them to models that call tools (a ReAct loop).

The pool's ground-truth column (``lab.oracle_column``) is never shown: ``simulate`` reads only the columns of cheap
``table`` rungs, or what an injected ``simulate_fn`` returns.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from functools import cached_property
from typing import Any

import numpy as np

from orchestrator.policy.planners.base import PlanningContext
from orchestrator.seeding import derive_rng
from orchestrator.space.pool import describe
from vocabulary.domain import Candidate, Conditions, InvalidCandidate, parse_candidate

__all__ = ["PlanningTools", "SimulateFn", "select_shortlist"]

SimulateFn = Callable[[list[Candidate]], Mapping[str, Mapping[str, float]]]
"""Cheap rungs for a list of candidates: ``{candidate id: {property: value}}``."""

MAX_TEXT_CHARS = 80  # a candidate's text in any tool output or prompt
MAX_VALUE_CHARS = 32  # one parameter value of a conditions candidate
MAX_IDS = 24  # candidates per predict/simulate call
MAX_K = 10  # neighbours per similar call
N_BEST, N_WORST, N_FAILED = 5, 3, 3
_LABEL = re.compile(r"[cC](\d{1,4})")


def clip(text: Any, n: int = MAX_TEXT_CHARS) -> str:
    """``text`` cut to ``n`` characters, marked with an ellipsis when cut."""
    text = str(text)
    return text if len(text) <= n else text[: n - 1] + "…"


def _num(x: float) -> float | None:
    """Three significant digits keep prompts short; NaN and inf become null."""
    x = float(x)
    return float(f"{x:.3g}") if math.isfinite(x) else None


def _dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


class PlanningTools:
    """Tool functions over one planning context.

    Args:
        context: the planning context of this iteration.
        simulate_fn: the campaign's cheap rungs; default: the pool columns of ``table`` rungs that cost less than
            ``screening.cheap_s`` per candidate.
        labels: shortlist labels (``{"c00": pool index}``) used in outputs and accepted as references.
    """

    def __init__(self, context: PlanningContext, simulate_fn: SimulateFn | None = None, labels: Mapping[str, int] | None = None):
        self.context = context
        self.simulate_fn = simulate_fn
        self.labels: dict[str, int] = dict(labels or {})
        self._label_of = {index: label for label, index in self.labels.items()}

    # ----------------------------------------------------------------------------------------------- references
    def set_labels(self, labels: Mapping[str, int]) -> None:
        self.labels = dict(labels)
        self._label_of = {index: label for label, index in self.labels.items()}

    def name(self, index: int) -> str:
        """The shortlist label of a pool row, or its clipped text."""
        return self._label_of.get(int(index)) or self.text(index)

    def text(self, index: int) -> str:
        """A candidate's text: SMILES or formula, or its parameter values joined by `` | `` (each clipped)."""
        candidate = self.context.pool.candidates[int(index)]
        if isinstance(candidate, Conditions):
            return " | ".join(clip(v, MAX_VALUE_CHARS) for v in candidate.values.values())
        return clip(describe(candidate))

    def resolve(self, ref: Any) -> int:
        """Pool index of a reference (label, pool id, SMILES, formula, conditions); ``InvalidCandidate`` if none."""
        pool, kind = self.context.pool, self.context.spec.campaign.kind
        if isinstance(ref, str):
            text = ref.strip()
            match = _LABEL.fullmatch(text)
            if match and kind == "material" and text[0] == "C":
                match = None  # 'C60' is a formula; labels are lower case
            if match:
                label = f"c{int(match.group(1)):0{self._label_width()}d}"
                if label in self.labels:
                    return self.labels[label]
                if self.labels:
                    raise InvalidCandidate(f"{text!r} is not a shortlist id; use one of {self._label_range()}")
            if text in pool.index:
                return pool.index[text]
            raw: Any = _conditions_mapping(text, pool.space.names if pool.space else ()) if kind == "conditions" else text
        else:
            raw = ref
        candidate = parse_candidate(kind, raw, pool.space)
        if candidate.id not in pool.index:
            space = self.context.spec.space
            if not space.generate:
                raise InvalidCandidate(f"{clip(ref)!r} is not in the campaign's design space; propose a member of the pool")
            from orchestrator.policy.generation import constraint_error

            error = constraint_error(space, candidate)
            if error:
                raise InvalidCandidate(error)
            pool.extend([candidate])  # open space: a new, valid candidate joins the pool (recorded by the plan node)
        return pool.index[candidate.id]

    def _label_width(self) -> int:
        return max((len(label) - 1 for label in self.labels), default=2)

    def _label_range(self) -> str:
        labels = sorted(self.labels)
        return f"{labels[0]}..{labels[-1]}" if labels else "the shortlist"

    def _resolve_many(self, refs: Sequence[Any]) -> tuple[list[int], list[dict[str, str]]]:
        found, errors = [], []
        for ref in list(refs)[:MAX_IDS]:
            try:
                found.append(self.resolve(ref))
            except InvalidCandidate as exc:
                errors.append({"ref": clip(ref), "error": clip(exc, 160)})
        return found, errors

    # ----------------------------------------------------------------------------------------------- objective
    def shown(self, utility: float) -> float | None:
        """A utility in the objective's unit: the value (maximize/minimize) or the distance from the target."""
        direction = self.context.spec.objective.direction
        return _num(-utility if direction in ("minimize", "target") else utility)

    @property
    def value_name(self) -> str:
        return "distance" if self.context.spec.objective.direction == "target" else "value"

    # ----------------------------------------------------------------------------------------------- surrogate
    @property
    def has_surrogate(self) -> bool:
        from orchestrator.policy.planners.bo import has_fitted_surrogate

        return has_fitted_surrogate(self.context)

    @cached_property
    def surrogate(self):
        """The campaign's GP, rebuilt from its recorded hyperparameters on the lab data with the ladder prior its
        state records (``bo.campaign_utility_model``, what bo and the screen read); None before it exists."""
        if not self.has_surrogate:
            return None
        from orchestrator.policy.planners.bo import campaign_utility_model

        return campaign_utility_model(self.context)

    def predict_utilities(self, indices: Sequence[int]) -> tuple[np.ndarray, np.ndarray] | None:
        """Posterior mean and sd of the utility at pool rows, or None without a surrogate."""
        if self.surrogate is None or len(indices) == 0:
            return None
        return self.surrogate.predict_rows(np.asarray(indices, dtype=int))  # the GP's inputs and prior per pool row

    # ----------------------------------------------------------------------------------------------- tools
    def predict(self, candidate_ids: Sequence[str]) -> str:
        """Surrogate mean and sd for candidates (objective unit; sd is one standard deviation)."""
        indices, errors = self._resolve_many(candidate_ids)
        if self.surrogate is None:
            need = min(self.context.spec.planner.n_initial, 2)
            return _dumps({"note": f"no surrogate yet: it is fitted after {need} lab results "
                                   f"({len(self.context.observed)} so far); rely on history and similar", "errors": errors})
        mean, sd = self.predict_utilities(indices) if indices else (np.zeros(0), np.zeros(0))
        rows = [{"id": self.name(i), f"pred_{self.value_name}": self.shown(m), "sd": _num(s)}
                for i, m, s in zip(indices, mean, sd, strict=True)]
        return _dumps({"predictions": rows, **({"errors": errors} if errors else {})})

    def cheap_columns(self) -> list[str]:
        """Pool columns that cheap table rungs read, never the lab's ground truth."""
        spec = self.context.spec
        hidden = {spec.lab.oracle_column, "_oracle"}
        return [r.column for r in spec.ladder
                if r.simulator == "table" and r.cost_s <= spec.screening.cheap_s
                and r.column in self.context.pool.columns and r.column not in hidden]

    def surveyed_rungs(self) -> dict[str, np.ndarray]:
        """Rungs the campaign has read over the whole pool (``PlanningContext.ladder``): name -> value per pool row,
        NaN where unknown; empty when the context carries none."""
        ladder = getattr(self.context, "ladder", None)
        values = getattr(ladder, "values", None) if ladder is not None else None
        if not isinstance(values, Mapping):
            return {}
        n_pool = len(self.context.pool)
        out = {}
        for name, column in values.items():
            column = np.asarray(column, dtype=float)
            if column.shape == (n_pool,):
                out[str(name)] = column
        return out

    def simulate_values(self, indices: Sequence[int]) -> dict[int, dict[str, float | None]]:
        """Rung numbers per pool row (rows without numbers are left out): the injected ``simulate_fn``, or the
        surveyed rungs (by rung name) plus the columns of cheap table rungs that were not surveyed."""
        pool = self.context.pool
        out: dict[int, dict[str, float | None]] = {}
        if self.simulate_fn is not None:
            results = self.simulate_fn([pool.candidates[int(i)] for i in indices])
            for i in indices:
                values = results.get(pool.ids[int(i)])
                if values:
                    out[int(i)] = {clip(k, 40): _num(v) for k, v in list(values.items())[:8]}
            return out
        surveyed = self.surveyed_rungs()
        spec = self.context.spec
        surveyed_columns = {r.column for r in spec.ladder if r.name in surveyed and r.simulator == "table"}
        columns = [c for c in self.cheap_columns() if c not in surveyed_columns]
        for i in indices:
            values = {clip(name, 40): _num(column[int(i)]) for name, column in list(surveyed.items())[:8]}
            values.update({c: _num(pool.columns[c][int(i)]) for c in columns})
            if any(v is not None for v in values.values()):
                out[int(i)] = values
        return out

    def novelty(self, indices: Sequence[int]) -> list[float | None]:
        """How unlike everything tested each pool row is: 1 − the largest Tanimoto similarity to a lab result for
        molecules (0: a tested twin, 1: nothing alike), the Euclidean feature distance to the nearest lab result
        otherwise; None before any result."""
        c = self.context
        if len(c.observed) == 0:
            return [None] * len(indices)
        out = []
        for index in indices:
            (_, score), = self.neighbours(int(index), 1)
            out.append(round(1.0 - score, 2) if c.spec.campaign.kind == "molecule" else _num(score))
        return out

    def simulate(self, candidate_ids: Sequence[str]) -> str:
        """The cheap rungs' numbers for candidates (simulator outputs, not lab results)."""
        indices, errors = self._resolve_many(candidate_ids)
        values = self.simulate_values(indices)
        rows = [{"id": self.name(i), **values[i]} for i in indices if i in values]
        note = {} if rows or not indices else {"note": "no cheap simulation is available for these candidates"}
        return _dumps({"simulated": rows, **note, **({"errors": errors} if errors else {})})

    def history(self, n_best: int = N_BEST, n_worst: int = N_WORST) -> str:
        """Best, worst and failed lab results so far, and counts; never the whole ledger."""
        c = self.context
        order = np.argsort(-c.utilities, kind="stable") if len(c.utilities) else np.zeros(0, dtype=int)

        def row(k: int) -> dict[str, Any]:
            return {"candidate": self.text(c.observed[k]), self.value_name: self.shown(c.utilities[k])}

        failed = [int(i) for i in getattr(c, "failed", ())]  # pool rows of the failures the campaign learns from
        n_best, n_worst = min(max(int(n_best), 0), N_BEST), min(max(int(n_worst), 0), N_WORST)
        # Slow-changing lists first, counts last: consecutive prompts then share a longer prefix (llama.cpp's KV reuse).
        summary: dict[str, Any] = {
            "best": [row(int(k)) for k in order[:n_best]],
            "worst": [row(int(k)) for k in order[::-1][: max(min(n_worst, len(order) - n_best), 0)]],  # not also in best
            "n_results": int(len(c.observed)),
            "n_pending": int(len(c.pending)),
        }
        if failed:
            summary["n_failed"] = len(failed)
            summary["failed"] = [{"candidate": self.text(i), "reason": "failed in the lab: likely infeasible here"}
                                 for i in failed[-N_FAILED:]]
        if len(c.pending):
            summary["pending"] = [self.text(i) for i in c.pending[:N_WORST]]
        return _dumps(summary)

    def neighbours(self, index: int, k: int) -> list[tuple[int, float]]:
        """The k tested rows nearest to a pool row: (observed position, similarity or distance)."""
        c = self.context
        if len(c.observed) == 0:
            return []
        X = c.pool.features
        x, T = X[int(index)], X[c.observed]
        if c.spec.campaign.kind == "molecule":  # Tanimoto on fingerprint bits
            dot = T @ x
            denominator = (T * T).sum(1) + x @ x - dot
            scores = np.where(denominator > 0, dot / np.where(denominator > 0, denominator, 1.0), 1.0)
            order = np.argsort(-scores, kind="stable")
        else:
            scores = np.sqrt(((T - x) ** 2).sum(1))
            order = np.argsort(scores, kind="stable")
        return [(int(j), float(scores[j])) for j in order[: max(1, min(int(k), MAX_K))]]

    def similar(self, candidate_id: str, k: int = 3) -> str:
        """The k nearest tested candidates (Tanimoto similarity for molecules, Euclidean distance otherwise)."""
        try:
            index = self.resolve(candidate_id)
        except InvalidCandidate as exc:
            return _dumps({"error": clip(exc, 200)})
        c = self.context
        measure = "tanimoto" if c.spec.campaign.kind == "molecule" else "euclidean_distance"
        rows = [{"candidate": self.text(c.observed[j]), measure: _num(score), self.value_name: self.shown(c.utilities[j])}
                for j, score in self.neighbours(index, k)]
        return _dumps({"id": self.name(index), "neighbours": rows} if rows else {"id": self.name(index), "note": "nothing tested yet"})

    def constraints(self) -> str:
        """The design space and the objective, in words."""
        spec, pool = self.context.spec, self.context.pool
        objective = spec.objective
        unit = f" {objective.unit}" if objective.unit else ""
        if objective.direction == "target":
            goal = (f"bring {objective.property} within ±{objective.tolerance:g}{unit} of {objective.target:g}{unit}; "
                    f"'distance' is |{objective.property} − {objective.target:g}|, lower is better")
        else:
            goal = f"{objective.direction} {objective.property}{unit}; 'value' is {objective.property}"
        out: dict[str, Any] = {
            "objective": goal,
            "candidate_kind": spec.campaign.kind,
            "n_pool": len(pool),
            "n_available": int(len(self.context.available)),
            "rules": ["propose only untested pool members (shortlist ids are the easy way)",
                      "no candidate twice in a batch; none already tested or pending"],
        }
        if spec.space.generate:
            space = spec.space
            out["rules"][0] = "propose shortlist ids or new candidates (SMILES or formulas) that meet the limits below"
            out["limits"] = {k: v for k, v in {"max_heavy_atoms": space.max_heavy_atoms if spec.campaign.kind == "molecule" else None,
                                               "max_atoms": space.max_atoms if spec.campaign.kind == "material" else None,
                                               "elements": space.elements}.items() if v}
        if pool.space is not None:
            out["candidate_format"] = " | ".join(clip(name, 40) for name in pool.space.names)
            out["parameters"] = [
                {"name": clip(p.name, 40), **({"choices": [clip(ch, 40) for ch in p.choices[:6]] + ([f"(+{len(p.choices) - 6} more)"] if len(p.choices) > 6 else [])}
                                              if p.kind == "categorical" else {"low": _num(p.low), "high": _num(p.high)})}
                for p in pool.space.parameters[:8]
            ]
        return _dumps(out)

    # ----------------------------------------------------------------------------------------------- LangChain
    def as_langchain_tools(self) -> list:
        """The five tools as LangChain ``StructuredTool`` objects (closures over this context)."""
        from langchain_core.tools import StructuredTool

        def predict(candidate_ids: list[str]) -> str:
            """Surrogate (Gaussian process) mean and sd for up to 24 candidates, by shortlist id or SMILES/formula."""
            return self.predict(candidate_ids)

        def simulate(candidate_ids: list[str]) -> str:
            """Cheap simulation results (the fidelity ladder's cheap rungs) for up to 24 candidates."""
            return self.simulate(candidate_ids)

        def history() -> str:
            """Best, worst and failed lab results so far, with counts."""
            return self.history()

        def similar(candidate_id: str, k: int = 3) -> str:
            """The k nearest already-tested candidates to one candidate, with their lab results."""
            return self.similar(candidate_id, k)

        def constraints() -> str:
            """The objective and the design space, in words."""
            return self.constraints()

        return [StructuredTool.from_function(f) for f in (predict, simulate, history, similar, constraints)]


def _conditions_mapping(text: str, names: Sequence[str]) -> Any:
    """Conditions given as JSON (``{"T": 60}``), as ``name=value; name=value``, or as values joined by `` | ``."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    values = [v.strip() for v in text.split("|")]
    if len(names) > 1 and len(values) == len(names):
        return dict(zip(names, values, strict=True))
    pairs = [part.split("=", 1) for part in text.split(";") if "=" in part]
    if not pairs:
        raise InvalidCandidate(f"conditions {clip(text)!r} are neither a shortlist id nor a JSON object of parameter values")
    return {name.strip(): value.strip() for name, value in pairs}


def select_shortlist(tools: PlanningTools, size: int) -> tuple[list[int], np.ndarray | None]:
    """Up to ``size`` available pool rows worth showing the model, best first, and their log EI (None without a GP).

    With a surrogate: the top rows by log expected improvement over the best lab utility. Without one: a seeded
    random sample of the available pool.
    """
    c = tools.context
    available = np.asarray(c.available, dtype=int)
    if len(available) == 0:
        return [], None
    size = min(size, len(available))
    if tools.surrogate is None:
        rng = derive_rng(c.seed, c.iteration, "plan", "llm-shortlist")
        return [int(i) for i in rng.choice(available, size=size, replace=False)], None
    best = float(np.max(c.utilities))
    log_ei = tools.surrogate.log_improvement_rows(available, best)
    order = np.argsort(-log_ei, kind="stable")[:size]
    return [int(available[k]) for k in order], log_ei[order]
