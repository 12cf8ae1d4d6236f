"""Judge recorders are explicit: two scorings, or two whole judged campaigns, in threads of one process each record
exactly their own judge calls (the MCP server and the dashboard run campaigns this way)."""

from __future__ import annotations

import ast
import json
import threading
from pathlib import Path

import pytest

from rewards import judge
from rewards.context import StepContext
from rewards.judge import JudgeRecorder, call_key, judge_messages, use_judge_model
from rewards.rubric import load_rubric

N_STEPS = 4
STATEMENT = next(c for c in load_rubric("judged").criteria if c.scorer == "llm_judge")


class PromptJudge:
    """A deterministic fake chat model whose reply is a function of the prompt (``reply``): "yes" when the candidate
    is ``CCO``, else "no", naming the candidate. With ``barrier``, every call waits there, so two threads call in
    lockstep."""

    def __init__(self, barrier: threading.Barrier | None = None) -> None:
        self.barrier = barrier
        self.n_calls = 0
        self._lock = threading.Lock()

    @staticmethod
    def reply(messages) -> str:
        evidence = json.loads(messages[-1][1].split("Evidence: ", 1)[1])
        smiles = evidence["candidate"].get("smiles", "?")
        return json.dumps({"reason": f"about {smiles}", "verdict": "yes" if smiles == "CCO" else "no"})

    def invoke(self, messages):
        if self.barrier is not None:
            self.barrier.wait(timeout=60)
        with self._lock:
            self.n_calls += 1
        return self.reply(messages)


def proposal(smiles: str, i: int) -> StepContext:
    return StepContext(stage="proposal", subject=f"{smiles}-{i}", arm="llm", is_valid=True,
                       candidate={"type": "molecule", "smiles": smiles},
                       rationale=f"The cheap rung predicts -1{i}.8 kcal/mol for {smiles}, inside the window.")


@pytest.fixture
def private_models(monkeypatch):
    monkeypatch.setattr(judge, "_MODELS", {})


def test_two_scorings_in_lockstep_threads_each_record_only_their_own_calls(private_models):
    """Every judge call of the two threads happens while the other thread is also mid-call (a barrier in the model),
    the interleaving under which one process-wide recording stack sends one thread's calls to the other's scope."""
    use_judge_model("embedded", PromptJudge(threading.Barrier(2)))
    rubric = load_rubric("judged")
    recorders = {"CCO": JudgeRecorder(), "CCCC": JudgeRecorder()}
    start, errors = threading.Barrier(2), []

    def score(smiles: str) -> None:
        try:
            start.wait(timeout=60)
            for i in range(N_STEPS):
                scores = rubric.score(proposal(smiles, i), recorder=recorders[smiles])
                [judged] = [s for s in scores if s.criterion_id == STATEMENT.id]
                assert judged.value == (1.0 if smiles == "CCO" else -1.0)
        except BaseException as exc:  # surfaced in the main thread below
            errors.append(exc)

    threads = [threading.Thread(target=score, args=(smiles,)) for smiles in recorders]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors, errors
    for smiles, recorder in recorders.items():
        asked = [judge_messages(proposal(smiles, i), STATEMENT.text) for i in range(N_STEPS)]
        assert [call["key"] for call in recorder.calls] == [call_key("embedded", m) for m in asked]  # its own, in order
        assert [call["response"] for call in recorder.calls] == [PromptJudge.reply(m) for m in asked]


def test_a_recorder_never_sees_another_recorders_known_answers(private_models):
    """Known answers are per recorder: one campaign's recorded reply does not answer another's call."""
    model = PromptJudge()
    use_judge_model("embedded", model)
    context = proposal("CCO", 0)
    messages = judge_messages(context, STATEMENT.text)
    replayed = JudgeRecorder({call_key("embedded", messages): json.dumps({"reason": "recorded", "verdict": "no"})})
    fresh = JudgeRecorder()
    assert judge.llm_judge(context, criterion=STATEMENT, recorder=replayed).value == -1.0
    assert judge.llm_judge(context, criterion=STATEMENT, recorder=fresh).value == 1.0
    assert (len(replayed.calls), len(fresh.calls), model.n_calls) == (0, 1, 1)


def test_the_judge_keeps_no_recording_state_in_its_module():
    """Only the model registry (names -> models, the loader, its lock) lives at module level in rewards.judge; no
    list or dict of answers or calls, and nothing in rewards/ stands in for a global with a thread-local or a
    ContextVar."""
    assert not hasattr(judge, "recording") and not hasattr(judge, "_RECORDING") and not hasattr(judge, "_ANSWERS")
    tree = ast.parse(Path(judge.__file__).read_text())
    assigned = {target.id for node in tree.body if isinstance(node, (ast.Assign, ast.AnnAssign))
                for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
                if isinstance(target, ast.Name)}
    assert assigned <= {"__all__", "VERDICT_SCHEMA", "BUILTINS", "_MODELS", "_LOADER", "_MODELS_LOCK"}, assigned
    for path in Path(judge.__file__).parent.rglob("*.py"):
        text = path.read_text()
        assert "threading.local" not in text and "ContextVar" not in text, path


@pytest.mark.slow
def test_two_judged_campaigns_in_threads_each_record_exactly_their_own_judge_calls(tmp_path, private_models):
    """Two judged campaigns (different seeds, so different proposals) driven at once in threads of one process on
    one ledger, as the MCP server and the dashboard drive them (``BackgroundRuns``), their first judge calls held at
    a barrier so both reward steps overlap. Each campaign records exactly the judge calls it records when run
    alone, and a recompute is answered from its own calls without asking the model."""
    from orchestrator.interfaces.background import BackgroundRuns
    from orchestrator.ledger import Ledger
    from orchestrator.loop.campaign import Campaign
    from orchestrator.loop.nodes.reward import recompute_rewards, stored_rewards
    from tests.rewards.test_reward_ledger import quick_spec

    specs = {f"judged-{seed}": quick_spec(rewards={"rubric": "judged"}, campaign={"seed": seed}) for seed in (1, 2)}

    def judge_calls(events: list) -> list[tuple[str, str]]:
        return sorted((e.payload["key"], e.payload["response"]) for e in events if e.type == "LLMCall")

    use_judge_model("embedded", PromptJudge())
    alone = {}
    for campaign_id, spec in specs.items():
        with Campaign.start(spec, db=tmp_path / f"alone-{campaign_id}.db", campaign_id=campaign_id) as campaign:
            campaign.run()
            alone[campaign_id] = judge_calls(campaign.ledger.events(campaign_id))
    assert all(alone.values()) and alone["judged-1"] != alone["judged-2"]  # both asked, about different proposals

    use_judge_model("embedded", _FirstCallsHeld(threading.Barrier(2)))
    ledger = Ledger.open(tmp_path / "together.db")
    try:
        runs = BackgroundRuns(ledger)
        started = [runs.start(spec, campaign_id=campaign_id) for campaign_id, spec in specs.items()]
        for run in started:
            run.join(timeout_s=600)
            assert (run.state, run.error) == ("finished", None)
        together = {campaign_id: ledger.events(campaign_id) for campaign_id in specs}
    finally:
        ledger.close()
    for campaign_id in specs:
        assert judge_calls(together[campaign_id]) == alone[campaign_id]
    use_judge_model("embedded", _MustNotBeAsked())
    for campaign_id, spec in specs.items():
        recomputed = recompute_rewards(together[campaign_id], spec, load_rubric("judged"))
        assert {t: r.reward for t, r in recomputed.items()} == {
            t: e.payload["reward"] for t, e in stored_rewards(together[campaign_id]).items()}


class _FirstCallsHeld(PromptJudge):
    """Holds each thread's first call at ``first_calls`` until the other campaign's reward step is asking too."""

    def __init__(self, first_calls: threading.Barrier) -> None:
        super().__init__()
        self.first_calls = first_calls
        self.threads_seen: set[int] = set()

    def invoke(self, messages):
        thread = threading.get_ident()
        with self._lock:
            is_first = thread not in self.threads_seen
            self.threads_seen.add(thread)
        if is_first:
            self.first_calls.wait(timeout=120)
        return super().invoke(messages)


class _MustNotBeAsked:
    def invoke(self, messages):
        raise AssertionError("the judge was asked although every call of the campaign is in its ledger")
