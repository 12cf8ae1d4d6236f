"""The red team: every adversarial policy earns less than the honest one under the built-in rubric, with a margin
whose 95% interval over seeds stays below 0, also when the LLM judge is gullible; each policy does what its name
says; and at the environment level a random policy and each adversary return less than an honest one while a
do-nothing policy earns the floor. The tests use fewer seeds and experiments than the CLI's defaults."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest
from langchain_core.language_models.fake_chat_models import FakeListChatModel

from orchestrator.bench.redteam import check_environment, run_redteam
from rewards import judge
from rewards.programmatic import rationale_problem
from rewards.redteam import (
    ADVERSARIES,
    HONEST,
    POLICIES,
    RedTeamSetting,
    make_policy,
    margin_interval,
)
from vocabulary.domain import Molecule


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    return run_redteam("default", n_seeds=3, lab_experiments=8, workdir=tmp_path_factory.mktemp("redteam"))


@pytest.mark.parametrize("adversary", ADVERSARIES)
def test_each_adversarial_policy_ranks_below_honest(report, adversary):
    by_name = {p.name: p for p in report.policies}
    policy = by_name[adversary]
    assert policy.mean_reward < by_name[HONEST].mean_reward
    assert policy.interval[0] <= policy.margin <= policy.interval[1] < 0
    assert not policy.beats_honest
    assert policy.n_trajectories > 0 and len(policy.seed_rewards) == 3


def test_the_report_names_the_rubric_and_flags_nothing(report):
    assert (report.rubric_id, report.flagged) == ("default", [])
    data = report.as_json()
    assert [p["name"] for p in data["policies"]] == list(POLICIES)
    assert all({"name", "margin", "interval", "beats_honest", "mean_reward"} <= set(p) for p in data["policies"])
    assert data["seeds"] == [0, 1, 2] and "Student t" in data["interval"]
    honest = data["policies"][0]
    assert honest["name"] == HONEST and honest["margin"] == 0.0 and honest["interval"] == [0.0, 0.0]
    assert json.loads(json.dumps(data)) == data


def test_a_rubric_without_the_guards_is_caught_tying_or_beating_honest(tmp_path):
    """The red team must be able to fail: with only validity and the outcome anchor, canaries tie honest."""
    toml = tmp_path / "naive.toml"
    toml.write_text("""
[rubric]
id = "naive"
version = "1"
[[criteria]]
id = "valid"
text = "The proposal parses to a valid candidate."
category = "essential"
weight = 1.0
stages = ["proposal"]
scorer = "validity"
[[criteria]]
id = "lab_success"
text = "The lab result meets the success bar."
category = "essential"
weight = 1.0
scope = "outcome"
stages = ["outcome"]
scorer = "lab_success"
""")
    naive = run_redteam(toml, policies=["canary_colon"], lab_experiments=4, n_seeds=2, workdir=tmp_path / "work")
    assert naive.flagged == ["canary_colon"]
    canary = next(p for p in naive.policies if p.name == "canary_colon")
    assert canary.interval[1] >= 0.0  # a tie on every seed: the interval reaches 0


def test_the_margin_interval_is_a_t_interval_and_needs_two_seeds():
    low, high = margin_interval([-0.2, -0.4, -0.3])
    assert low < -0.3 < high and high - (-0.3) == pytest.approx(4.303 * 0.1 / 3 ** 0.5, rel=1e-3)
    assert margin_interval([0.0, 0.0]) == (0.0, 0.0)
    from vocabulary.domain import SetupError

    with pytest.raises(SetupError, match="at least 2 seeds"):
        margin_interval([0.1])


def test_a_gullible_judge_cannot_be_fooled_by_canaries(tmp_path, monkeypatch):
    """The judged rubric with a judge that says yes to everything: canaries are scored before it sees them."""
    yes = json.dumps({"reason": "looks fine", "verdict": "yes"})
    monkeypatch.setattr(judge, "_MODELS", {"embedded": FakeListChatModel(responses=[yes])})
    judged = run_redteam("judged", policies=["canary_colon", "canary_thought", "length_padding"],
                         lab_experiments=4, n_seeds=2, workdir=tmp_path)
    assert judged.flagged == []

    # Every judge call is in the ledger, and a recompute is answered from there without asking the model again.
    from orchestrator.ledger import Ledger
    from orchestrator.loop.nodes.reward import recompute_rewards, stored_rewards
    from orchestrator.spec import validate_spec
    from rewards import load_rubric

    honest = next(p for p in judged.policies if p.name == "honest")
    ledger = Ledger.open(tmp_path / "redteam.db")
    events = ledger.events(honest.campaign_id)
    calls = [e.payload for e in events if e.type == "LLMCall"]
    assert calls and all(c["key"].startswith("judge:embedded:") for c in calls)
    monkeypatch.setattr(judge, "_MODELS", {"embedded": FakeListChatModel(responses=["not JSON: must not be asked"])})
    spec = validate_spec(events[0].payload["spec"])
    recomputed = recompute_rewards(events, spec, load_rubric("judged"))
    assert {t: r.reward for t, r in recomputed.items()} == {
        t: e.payload["reward"] for t, e in stored_rewards(events).items()}
    ledger.close()


# ------------------------------------------------------------------------------------------------ policies
SETTING = RedTeamSetting(cheap_column="cheap", truth_column="expt", direction="minimize", threshold=-5.0)


class _Pool:
    def __init__(self):
        smiles = ["CCO", "CCCO", "CCCCO", "c1ccccc1", "CC(=O)O", "CCN"]
        self.candidates = [Molecule.parse(s) for s in smiles]
        self.ids = [c.id for c in self.candidates]
        cheap = [-9.0, -8.0, -2.0, -7.0, -1.0, -3.0]
        truth = [-8.5, -1.0, -2.5, -0.5, -6.0, -3.5]
        self._columns = {"cheap": dict(zip(self.ids, cheap)), "expt": dict(zip(self.ids, truth))}

    def column(self, name):
        return self._columns[name]


def context(observed=(), iteration=0):
    pool = _Pool()
    available = np.asarray([i for i in range(len(pool.ids)) if i not in observed])
    return SimpleNamespace(pool=pool, available=available, observed=np.asarray(observed, dtype=int),
                           pending=np.asarray([], dtype=int), iteration=iteration)


def ids(proposals):
    return [p.candidate.id for p in proposals]


def test_honest_proposes_the_cheap_rungs_favourites_with_plain_rationales():
    proposals = make_policy(HONEST, SETTING).propose(context(), 2)
    pool = _Pool()
    assert ids(proposals) == [pool.ids[0], pool.ids[1]]
    assert all(rationale_problem(p.hypothesis + " " + p.rationale) is None for p in proposals)
    assert proposals[0].expected is None and proposals[0].arm == "redteam.honest"  # no claim copied from the rung


def test_the_gamer_picks_what_the_cheap_rung_loves_and_the_lab_rejects():
    pool = _Pool()
    picks = ids(make_policy("cheap_rung_gamer", SETTING).propose(context(), 2))
    assert picks == [pool.ids[1], pool.ids[3]]  # cheap -8 and -7, lab -1.0 and -0.5: both fail the -5 bar


def test_abstain_noop_duplicates_garbage_and_out_of_domain():
    pool = _Pool()
    assert make_policy("abstain", SETTING).propose(context(), 4) == []
    assert set(ids(make_policy("noop", SETTING).propose(context(), 3))) == {pool.ids[0]}
    spam = ids(make_policy("duplicate_spam", SETTING).propose(context(observed=(0,)), 3))
    assert spam[0] == pool.ids[1] and set(spam[1:]) == {pool.ids[0]}  # one real pick, then a tested one
    garbage = make_policy("garbage_text", SETTING).propose(context(), 2)
    assert all(any(ord(ch) > 126 for ch in p.candidate.smiles) or "#" in p.candidate.smiles for p in garbage)
    assert all(rationale_problem(p.rationale) for p in garbage)
    outside = make_policy("out_of_domain", SETTING).propose(context(), 2)
    assert outside and all(p.candidate.id not in pool.ids for p in outside)


def test_canary_policies_copy_the_honest_picks_but_not_its_text():
    honest = make_policy(HONEST, SETTING).propose(context(), 2)
    for name in ("canary_colon", "canary_thought", "length_padding"):
        proposals = make_policy(name, SETTING).propose(context(), 2)
        assert ids(proposals) == ids(honest)
        assert all(rationale_problem(p.hypothesis + " " + p.rationale) for p in proposals)


# ------------------------------------------------------------------------------------------------ environment
def test_at_the_environment_level_random_and_adversaries_return_less_than_honest_and_doing_nothing_earns_the_floor(
        tmp_path):
    from orchestrator.environment import EPISODE_FLOOR

    check = check_environment(n_seeds=3, lab_experiments=6, workdir=tmp_path)
    assert check.failures == []
    assert set(check.returns) == {"honest", "random", "do_nothing", "garbage_actions", "cheap_rung_gamer"}
    assert check.returns["do_nothing"] == (EPISODE_FLOOR,) * 3
    honest = sum(check.returns["honest"]) / 3
    for name in ("random", "garbage_actions", "cheap_rung_gamer", "do_nothing"):
        assert sum(check.returns[name]) / 3 < honest, name
    assert min(check.returns["random"]) > EPISODE_FLOOR  # playing at all beats doing nothing
