"""A chat model's prior over the pool as a ladder rung (``llm_prior``): every candidate gets an estimate, and the
ladder reads it like any proxy rung."""

from __future__ import annotations

import json
import re

import numpy as np
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from orchestrator.policy.planners.llm_prior import (
    SECONDS_PER_CANDIDATE,
    LLMPriorSimulator,
)
from simulators import load_simulator
from tests.conftest import surveyed_freesolv
from vocabulary.domain import Molecule


class TableChatModel(BaseChatModel):
    """Answers an estimate request with the values of a table, looked up by the listed candidate texts."""

    table: dict[str, float]
    n_calls: int = 0

    @property
    def _llm_type(self) -> str:
        return "table"

    def _generate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
        self.n_calls += 1
        texts = re.findall(r"^- (.+)$", messages[-1].content, re.M)
        answer = json.dumps({"values": [self.table.get(t, 0.0) for t in texts]})
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=answer))])


def test_the_embedded_model_answers_every_candidate_and_is_charged_per_candidate():
    simulator = load_simulator("llm_prior", target="hydration free energy", unit="kcal/mol", batch=2)
    molecules = [Molecule.parse(s) for s in ("CCO", "c1ccccc1", "CC(=O)O")]
    observations = simulator.evaluate(molecules)
    assert [o.candidate_id for o in observations] == [m.id for m in molecules]
    for o in observations:
        assert o.source == "llm_prior" and o.cost_s == SECONDS_PER_CANDIDATE
        assert (o.status == "ok" and np.isfinite(o.properties["expected"])) or o.reason


def test_an_unusable_answer_fails_its_candidates_with_the_reason():
    class ProseChatModel(TableChatModel):
        def _generate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
            return ChatResult(generations=[ChatGeneration(message=AIMessage(content="not json"))])

    simulator = LLMPriorSimulator(target="y", batch=2)
    simulator._chat_model = ProseChatModel(table={})
    observations = simulator.evaluate([Molecule.parse("CCO"), Molecule.parse("CCN"), Molecule.parse("CCC")])
    assert [o.status for o in observations] == ["failed"] * 3 and "unusable" in observations[0].reason


def test_a_model_that_knows_the_answers_sends_the_best_candidates_to_the_lab_first(tmp_path, monkeypatch):
    spec = surveyed_freesolv(tmp_path, n_molecules=40, lab_experiments=4)
    data = spec.model_dump()
    data["objective"].update(direction="maximize", target=None, tolerance=None)
    data["ladder"] = [{"name": "model_prior", "simulator": "llm_prior", "property": "expected", "proxy": "expected",
                       "parameters": {"target": "hydration free energy", "unit": "kcal/mol"}}]
    data["screening"]["executor"] = "serial"  # the scripted model lives in this process
    data["planner"].update(control=None, control_share=0.0)
    from orchestrator.spec import validate_spec

    spec = validate_spec(data)
    from orchestrator.space.pool import describe, load_pool

    pool = load_pool(spec)
    truth = np.asarray(pool.columns["expt"], dtype=float)
    model = TableChatModel(table={describe(c): float(v) for c, v in zip(pool.candidates, truth, strict=True)})
    monkeypatch.setattr("orchestrator.policy.planners.llm_models.load_chat_model", lambda *a, **k: model)

    from orchestrator.loop.campaign import Campaign

    with Campaign.start(spec, db=tmp_path / "ledger.db") as campaign:
        summary = campaign.run()
    first = summary["measured"][: spec.planner.batch_size]
    best = [pool.ids[i] for i in np.argsort(-truth)]
    assert model.n_calls >= 1, "the survey asked the model"
    assert set(first) == set(best[: spec.planner.batch_size]), "the cold start follows the model's prior"
