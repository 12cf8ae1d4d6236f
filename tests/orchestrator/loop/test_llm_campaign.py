"""The llm arm end to end: the real embedded model plans inside a campaign, every call is in the ledger; scripted
tool-calling models show that tool use is switched on from the spec, and the planner statistics are counted right."""

from __future__ import annotations

import json

import pytest
from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from orchestrator.ledger import verify
from orchestrator.loop.campaign import Campaign
from orchestrator.policy.planner_stats import planner_stats
from orchestrator.spec import validate_spec
from tests.conftest import small_spec
from tests.orchestrator.policy.planners.test_llm import ScriptedChatModel, data_of


@pytest.mark.slow
def test_a_campaign_with_the_embedded_model(tmp_path):
    spec = small_spec(lab_experiments=4, planner__main="llm", planner__control="bo")
    with Campaign.start(spec, db=tmp_path / "llm.db", campaign_id="llm") as campaign:
        summary = campaign.run()
        events = campaign.ledger.events("llm")
        report = verify(campaign.ledger, "llm")
    assert summary["status"] == "stopped" and summary["n_lab"] == 4 and report.is_identical
    calls = [e.payload for e in events if e.type == "LLMCall"]
    assert calls and all(c["response"] and c["messages"] and c["error"] is None for c in calls)
    assert all("api_key" not in str(c["parameters"]).lower() for c in calls)
    llm_proposals = [e.payload for e in events if e.type == "Proposed" and e.payload["arm"] == "llm"]
    assert llm_proposals and any(not p["is_fallback"] for p in llm_proposals), "the model's own picks are used"
    rejected = {e.payload["candidate_id"] for e in events if e.type == "Rejected" and e.payload["stage"] == "validate"}
    assert not rejected & {p["candidate_id"] for p in llm_proposals if not p["is_fallback"]}
    arms = {e.payload["arm"] for e in events if e.type == "Dispatched"}
    assert "llm" in arms
    # The model's own hypotheses, as it wrote them in the grammar's free-text field, are what the proposals carry.
    written = {json.loads(c["response"])["hypothesis"] for c in calls}
    own = [p for p in llm_proposals if not p["is_fallback"] and not p["is_anchor"]]
    assert own and all(p["hypothesis"] in written for p in own)
    # One anchor per lab slot: bo's pick, proposed beside the model's for the screen to weigh, never the model's.
    anchors = [p for p in llm_proposals if p["is_anchor"]]
    assert anchors and all(p["is_bo_pick"] and p["rationale"].startswith("anchor:") for p in anchors)
    assert stats_anchor_count(summary) == len(anchors)
    assert all(p["is_bo_pick"] is not None for p in llm_proposals)
    stats = summary["planner_stats"]["llm"]
    assert stats["calls"] == len(calls) and stats["n_proposals"] == len(llm_proposals)
    decisions = [p for p in llm_proposals if not p["is_anchor"]]  # the model's picks and bo's fill-ins for them
    assert stats["fallback_share"] == sum(p["is_fallback"] for p in decisions) / len(decisions)
    assert stats["n_completion_tokens"] > 0
    # The model, not bo, chose its picks: each names a row of the shortlist it was shown, and its rate of taking
    # the first row is beside a coin's.
    assert own and all(p["n_shown"] and 0 <= p["shown_position"] < p["n_shown"] for p in own)
    assert stats["first_option_share"] is not None and 0 < stats["coin_first_option_share"] <= 0.5
    assert 0.0 <= stats["coin_differs_from_bo_share"] <= 1.0


# --------------------------------------------------------------------------------------------------- scripted
class ToolUsingPolicyModel(ScriptedChatModel):
    """A tool-calling chat model with a policy instead of a script.

    As a ReAct agent (the five planning tools bound) it first asks ``predict`` for the whole shortlist and
    ``history``, then says it is done. Asked for the structured answer, it picks the ``n`` shortlist rows with the
    best predicted distance from the ``predict`` results it was given (the last rows when there is no surrogate yet);
    with ``is_garbage`` it answers off the schema every time, so every proposal falls back to bo.
    """

    is_garbage: bool = False

    def bind_tools(self, tools, *, tool_choice=None, **kwargs):
        return self.bind(tools=tools, tool_choice=tool_choice, **kwargs)

    def _generate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
        self.prompts.append(list(messages))
        names = [t.get("title") if isinstance(t, dict) else t.name for t in kwargs.get("tools") or []]
        if "propose_experiments" in names:
            message = AIMessage(content="", tool_calls=[{"name": "propose_experiments", "id": f"p{len(self.prompts)}",
                                                          "args": {"proposals": "none"} if self.is_garbage else
                                                          self._answer(messages, kwargs["tools"][0])}])
        elif not any(m.type == "tool" for m in messages):
            rows = data_of(messages[1].content)["shortlist"]["rows"]
            message = AIMessage(content="", tool_calls=[
                {"name": "predict", "args": {"candidate_ids": [row[0] for row in rows]}, "id": "t-predict"},
                {"name": "history", "args": {}, "id": "t-history"},
            ])
        else:
            message = AIMessage(content="I know enough to choose.")
        return ChatResult(generations=[ChatGeneration(message=message)])

    @staticmethod
    def _answer(messages, schema) -> dict:
        n = schema["properties"]["proposals"]["minItems"]
        rows = [row[0] for row in data_of(messages[1].content)["shortlist"]["rows"]]
        predicted = [json.loads(m.content) for m in messages if m.type == "tool" and "predictions" in m.content]
        if predicted:
            rows = [p["id"] for p in sorted(predicted[-1]["predictions"], key=lambda p: p["pred_distance"])]
        else:
            rows = rows[::-1]
        return {"proposals": [{"candidate": label, "hypothesis": f"closest predicted: {label}", "rationale": "predict",
                               "expected": -12.0} for label in rows[:n]]}


def stats_anchor_count(summary) -> int:
    return summary["planner_stats"]["llm"]["n_anchor"]


def _scripted_campaign(tmp_path, monkeypatch, name: str, **overrides):
    model = ToolUsingPolicyModel(responses=[], is_garbage=overrides.pop("is_garbage", False))
    monkeypatch.setattr("orchestrator.policy.planners.llm_models.load_chat_model", lambda *args, **kwargs: model)
    spec = small_spec(lab_experiments=overrides.pop("lab_experiments", 8), planner__main="llm",
                      planner__control="bo", planner__model="openai:scripted", **overrides).model_dump()
    spec["ladder"] = [r for r in spec["ladder"] if r["simulator"] != "xtb"]  # the tests are about the planner
    spec = validate_spec(spec)
    with Campaign.start(spec, db=tmp_path / f"{name}.db", campaign_id=name) as campaign:
        summary = campaign.run()
        events = campaign.ledger.events(name)
        stats = planner_stats(campaign.ledger, name)
    return model, summary, events, stats


def test_a_tool_using_llm_arm_switched_on_from_the_spec_calls_the_tools_in_a_campaign(tmp_path, monkeypatch):
    model, summary, events, stats = _scripted_campaign(tmp_path, monkeypatch, "tools", planner__llm_tool_steps=2)
    assert summary["status"] == "stopped" and summary["n_lab"] == 8
    calls = [e.payload for e in events if e.type == "LLMCall"]
    steps = [c for c in calls if "tool_calls" in json.loads(c["response"] or "{}")]
    requested = [t["name"] for c in steps for t in json.loads(c["response"])["tool_calls"]]
    assert requested.count("predict") >= 2 and "history" in requested, "the model called the tools in every step"
    answered = [m for c in calls for m in c["messages"] if m["role"] == "tool"]
    assert any("pred_distance" in m["content"] for m in answered), "the tools ran and their results were recorded"
    assert any('"best"' in m["content"] for m in answered)
    # Its picks follow the predictions it asked for, and are recorded as its own.
    own = [e.payload for e in events if e.type == "Proposed" and e.payload["arm"] == "llm" and not e.payload["is_fallback"]
           and not e.payload["is_anchor"]]
    assert own and all(p["is_bo_pick"] is not None for p in own)
    assert any(p["hypothesis"].startswith("closest predicted: c") for p in own)
    llm = summary["planner_stats"]["llm"]
    assert llm == stats["llm"] and llm["calls"] == len(calls) and llm["fallback_share"] == 0.0
    assert llm["n_model_picks"] == len(own) and 0.0 <= llm["differs_from_bo_share"] <= 1.0
    assert llm["n_lab"] == sum(1 for e in events if e.type == "Dispatched" and e.payload["arm"] == "llm")


def test_without_tool_steps_the_model_never_gets_tools(tmp_path, monkeypatch):
    model, summary, events, stats = _scripted_campaign(tmp_path, monkeypatch, "no-tools", lab_experiments=4)
    calls = [e.payload for e in events if e.type == "LLMCall"]
    assert calls and not any(m["role"] == "tool" for c in calls for m in c["messages"])
    assert stats["llm"]["calls"] == len(calls) == len(model.prompts)


def test_planner_stats_count_fallbacks_and_picks_bo_would_not_have_made(tmp_path, monkeypatch):
    _, summary, events, stats = _scripted_campaign(tmp_path, monkeypatch, "garbage", lab_experiments=4, is_garbage=True)
    everything = [e.payload for e in events if e.type == "Proposed" and e.payload["arm"] == "llm"]
    proposed = [p for p in everything if not p["is_anchor"]]
    assert proposed and all(p["is_fallback"] for p in proposed)
    llm = stats["llm"]
    assert llm["n_fallback"] == len(proposed) and llm["n_model_picks"] == 0
    assert llm["fallback_share"] == 1.0, "every decision the model had was bo's fill-in"
    assert llm["n_anchor"] == len(everything) - len(proposed)
    assert llm["differs_from_bo_share"] is None and llm["n_lab_model_picks"] == 0
    assert llm["calls"] == 3 * llm["n_steps"], "a call and two repair rounds per step, then bo"
    assert summary["planner_stats"] == stats


def test_without_a_screen_the_lab_splits_each_batch_between_the_model_and_bos_anchors(tmp_path, monkeypatch):
    from orchestrator.loop.history import lab_history
    from orchestrator.loop.nodes.plan import _provenance

    model = ToolUsingPolicyModel(responses=[])
    monkeypatch.setattr("orchestrator.policy.planners.llm_models.load_chat_model", lambda *args, **kwargs: model)
    spec = small_spec(lab_experiments=12, planner__main="llm", planner__control=None, planner__control_share=0.0,
                      planner__proposals_per_slot=1, planner__batch_size=4, planner__model="openai:scripted",
                      lab__wait="all")
    with Campaign.start(spec, db=tmp_path / "lab.db", campaign_id="lab") as campaign:
        summary = campaign.run()
        events = campaign.ledger.events("lab")
        history = lab_history(campaign.ctx)
        provenance = _provenance(campaign.ctx, history)
        from types import SimpleNamespace

        from orchestrator.loop.view import CampaignView

        refolded = CampaignView(campaign.ledger, "lab", spec, campaign.ctx.pool, campaign.ctx.rungs)
        refolded.refresh()  # a view folded from the ledger's start, as a resumed campaign builds it
        fresh = _provenance(SimpleNamespace(view=refolded), history)
    assert summary["n_lab"] == 12
    proposed = [e.payload for e in events if e.type == "Proposed"]
    by_iteration: dict[int, list] = {}
    for p in proposed:
        by_iteration.setdefault(p["iteration"], []).append(p)
    assert len(proposed) == len({p["candidate_id"] for p in proposed}) >= 12
    first, *later = [by_iteration[k] for k in sorted(by_iteration)]
    assert len(first) == 4 and all(p["is_anchor"] for p in first), "bo's cold start is bo's alone"
    for batch in later:
        n_anchor = sum(p["is_anchor"] for p in batch)
        if len(batch) > 1:
            assert 1 <= n_anchor <= len(batch) - 1, "the model and bo each keep a slot"
        assert all(p["is_bo_pick"] for p in batch if p["is_anchor"])
    assert [len(batch) for batch in later] == [4, 4], "whole batches"
    # Every lab result knows whose pick it was, the same whether folded as the campaign went or read at once.
    anchors = {p["candidate_id"] for p in proposed if p["is_anchor"]}
    assert provenance == fresh and len(provenance) == len(history.results) == 12
    assert [source == "anchor" for _, _, source in provenance] == [r[0] in anchors for r in history.results]
    assert summary["planner_stats"]["llm"]["n_lab_anchor"] == len(anchors)


def test_planner_stats_on_hand_written_proposals(ledger):
    from vocabulary.events import LLMCall, Proposed

    def proposed(cid, arm="llm", **fields):
        candidate = {"type": "molecule", "smiles": "C"}
        return (Proposed(iteration=1, arm=arm, candidate_id=cid, candidate=candidate, **fields), f"p:{arm}:{cid}")

    ledger.append_many("c", [
        proposed("a", is_bo_pick=True, shown_position=0, n_shown=2, n_shown_bo_picks=1),
        proposed("b", is_bo_pick=False, shown_position=1, n_shown=2, n_shown_bo_picks=1),
        proposed("c", is_bo_pick=False, shown_position=0, n_shown=4, n_shown_bo_picks=1),
        proposed("d", is_fallback=True, is_bo_pick=True), proposed("e", arm="bo"),
        proposed("f", is_anchor=True, is_bo_pick=True),
        (LLMCall(iteration=1, key="it1:llm:0", model="m", messages=[], response="{}", n_prompt_tokens=100,
                 n_completion_tokens=20, latency_s=1.5), "call-0"),
    ])
    llm = planner_stats(ledger, "c")["llm"]
    assert llm["calls"] == 1 and llm["n_prompt_tokens"] == 100 and llm["model_wall_s"] == 1.5
    assert llm["n_proposals"] == 5 and llm["fallback_share"] == 0.25 and llm["n_anchor"] == 1, "of 4 decisions"
    assert llm["n_model_picks"] == 3 and llm["differs_from_bo_share"] == pytest.approx(2 / 3), "anchors are bo's"
    assert llm["coin_differs_from_bo_share"] == pytest.approx((0.5 + 0.5 + 0.75) / 3)
    assert llm["first_option_share"] == pytest.approx(2 / 3)
    assert llm["coin_first_option_share"] == pytest.approx((0.5 + 0.5 + 0.25) / 3)
    ledger.append_many("bracket", [proposed("a", arm="llm-random", is_bo_pick=True, shown_position=1, n_shown=2,
                                            n_shown_bo_picks=1), (LLMCall(iteration=1, key="it1:llm:0", model="m",
                                                                          messages=[], response="{}"), "call-1")])
    assert planner_stats(ledger, "bracket")["llm-random"]["calls"] == 0, "a coin calls no model"
    assert set(planner_stats(ledger, "c")) == {"llm"}, "bo is no llm arm"
    ledger.append_many("old", [proposed("a"), proposed("b", arm="bo")])
    assert planner_stats(ledger, "old")["llm"]["differs_from_bo_share"] is None, "an old ledger does not know"
    assert planner_stats(ledger, "none") == {"llm": {}}


def _bypass_campaign(tmp_path, monkeypatch, name: str, pick_last: bool):
    """A campaign whose scripted model always picks the shortlist row bo ranks last (or first): the planner's own
    record of bo's rank per shown label (``ProposeRun.shortlist_bo_rank``) tells the script which row that is."""
    from orchestrator.policy.planners import llm_graph
    from tests.orchestrator.policy.planners.test_llm import PolicyChatModel, answer

    runs = []
    gather = llm_graph.ProposeRun.gather

    def recording_gather(self, state):
        out = gather(self, state)
        runs.append(self)
        return out

    def policy(messages):
        ranks = runs[-1].shortlist_bo_rank
        choice = max(ranks, key=ranks.get) if pick_last else min(ranks, key=ranks.get)
        return answer(choice)

    model = PolicyChatModel(responses=[], policy=policy)
    monkeypatch.setattr(llm_graph.ProposeRun, "gather", recording_gather)
    monkeypatch.setattr("orchestrator.policy.planners.llm_models.load_chat_model", lambda *args, **kwargs: model)
    spec = small_spec(lab_experiments=12, planner__main="llm", planner__control=None, planner__control_share=0.0,
                      planner__proposals_per_slot=1, planner__batch_size=4, planner__model="openai:scripted",
                      lab__wait="all")
    with Campaign.start(spec, db=tmp_path / f"{name}.db", campaign_id=name) as campaign:
        summary = campaign.run()
        events = campaign.ledger.events(name)
    proposed = {e.payload["candidate_id"]: e.payload for e in events if e.type == "Proposed"}
    dispatched = [e.payload["candidate_id"] for e in events if e.type == "Dispatched"]
    return summary, dispatched, proposed


def test_a_model_that_picks_bos_last_option_changes_the_lab_order_in_its_slots(tmp_path, monkeypatch):
    _, first_order, first = _bypass_campaign(tmp_path, monkeypatch, "first", pick_last=False)
    summary, last_order, last = _bypass_campaign(tmp_path, monkeypatch, "last", pick_last=True)
    owned = [k for k, cid in enumerate(last_order) if not last[cid]["is_anchor"] and not last[cid]["is_fallback"]]
    assert owned and summary["planner_stats"]["llm"]["n_lab_model_picks"] == len(owned)
    batch = owned[0] // 4  # batches of 4; a batch is dispatched in no order the model's pick cannot change
    def batches(order):
        return [set(order[4 * b: 4 * b + 4]) for b in range(len(order) // 4)]

    assert batches(last_order)[:batch] == batches(first_order)[:batch], "until the model's slot, the same lab order"
    here, there = batches(last_order)[batch], batches(first_order)[batch]
    pick = last_order[owned[0]]
    assert pick not in there and here - {pick} == {c for c in there if first[c]["is_anchor"]}, \
        "the same anchors; the model's slot carries its own choice"
    assert last[pick]["is_bo_pick"] is False, "bo's last-ranked option is one bo would not have made"
