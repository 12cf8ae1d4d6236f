"""The verifiers adapter, run with verifiers itself: the taskset is found by its id, and `vf-eval closedloop` (its
own CLI entry point) evaluates it with a scripted model answering through verifiers' eval client (an httpx mock
transport: no network), the real interception server, the real MCP tool server and the rubric's rewards."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

pytest.importorskip("verifiers.v1")

import httpx  # noqa: E402

from tests.conftest import BUCHWALD_SPEC, ROOT  # noqa: E402


def test_import_closedloop_does_not_import_verifiers():
    code = "import sys, closedloop; assert 'verifiers' not in sys.modules, 'closedloop imported verifiers'; print('ok')"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr


def test_verifiers_finds_the_taskset_and_its_harness_by_id():
    import verifiers.v1 as vf
    from verifiers.v1.utils.loaders import (
        default_harness_id,
        harness_class,
        taskset_class,
    )

    cls = taskset_class("closedloop")
    assert issubclass(cls, vf.Taskset) and cls.__name__ == "CampaignTaskset"
    assert default_harness_id("closedloop") == "closedloop" and issubclass(harness_class("closedloop"), vf.Harness)
    task_cls = cls.task_type()
    assert {fn.__name__ for fn in task_cls.toolsets(task_cls.config_type()())[0].__class__.__dict__.values()
            if getattr(fn, "tool", False)} == {"propose", "run_rung", "query_surrogate", "query_ledger"}


def test_the_taskset_yields_episodes_whose_prompt_is_the_first_observation():
    from verifiers.v1.utils.loaders import taskset_class, taskset_config_type

    config = taskset_config_type("closedloop")(spec=str(BUCHWALD_SPEC), num_tasks=2, lab_budget=2)
    tasks = list(taskset_class("closedloop")(config))
    assert [t.data.seed for t in tasks] == [0, 1] and len({t.data.campaign_id for t in tasks}) == 2
    assert all("Candidates on offer" in t.data.prompt and t.data.system_prompt for t in tasks)


class ScriptedModel:
    """An OpenAI-compatible chat model, scripted: query the ledger once, then propose the first candidate on offer
    until a tool says the episode ended, then stop."""

    def __init__(self):
        self.requests: list[dict] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        self.requests.append(body)
        assert request.url.path.endswith("/chat/completions"), request.url
        messages = body["messages"]
        last = messages[-1]
        text = last["content"] if isinstance(last["content"], str) else json.dumps(last["content"])
        n_tool_turns = sum(m["role"] == "tool" for m in messages)
        if "The episode has ended" in text:
            message = {"role": "assistant", "content": "The campaign is over."}
        elif n_tool_turns == 0:
            message = self._call("campaign_query_ledger", {"what": "summary"}, len(messages))
        else:
            label = re.findall(r"^\s+(o\d+): ", text, flags=re.MULTILINE)[0]
            message = self._call("campaign_propose", {"candidate_ids": [label], "hypothesis": "the first on offer"},
                                 len(messages))
        finish = "tool_calls" if message.get("tool_calls") else "stop"
        return httpx.Response(200, json={
            "id": f"chatcmpl-{len(self.requests)}", "object": "chat.completion", "created": 0, "model": body["model"],
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}})

    @staticmethod
    def _call(name: str, arguments: dict, n: int) -> dict:
        return {"role": "assistant", "content": None, "tool_calls": [
            {"id": f"call_{n}", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}]}


def _core_return(data: dict) -> float:
    from orchestrator.environment import CampaignEnvironment
    from orchestrator.spec import CampaignSpec

    env = CampaignEnvironment(CampaignSpec.model_validate(data["spec"]), n_offer=data["n_offer"])
    try:
        obs = env.reset(seed=data["seed"], campaign_id=data["campaign_id"], **data["options"])
        env.step({"type": "query_ledger", "what": "summary"})
        while not obs.is_done:
            obs = env.step({"type": "propose", "candidate_ids": [obs.offer[0].label],
                            "hypothesis": "the first on offer"}).observation
        return env.state.episode_return
    finally:
        env.close()


@pytest.mark.slow
def test_vf_eval_runs_the_taskset_and_the_rubric_scores_it(tmp_path, monkeypatch, capsys):
    import verifiers.v1.clients.eval as eval_client
    from verifiers.v1.cli.eval.main import main

    model = ScriptedModel()
    monkeypatch.setattr(eval_client, "build_async_httpx",
                        lambda config: httpx.AsyncClient(transport=httpx.MockTransport(model)))
    monkeypatch.chdir(tmp_path)
    main(["closedloop", "--env.taskset.spec", str(BUCHWALD_SPEC), "--env.taskset.num-tasks", "2",
          "--env.taskset.lab-budget", "2", "--env.taskset.success-bar", "101", "--env.taskset.n-offer", "6",
          "--env.agent.runtime.type", "subprocess", "--model", "scripted", "--client.base-url", "http://scripted.invalid/v1", "--no-push", "--no-rich",
          "--output-dir", str(tmp_path / "outputs")])

    traces = [json.loads(line) for path in (tmp_path / "outputs").rglob("traces.jsonl")
              for line in path.read_text().splitlines() if line.strip()]
    traces = [t for t in traces if "rewards" in t] or [t for e in traces for t in e.get("traces", [])]
    assert len(traces) == 2, traces
    for trace in traces:
        assert not trace.get("errors"), trace["errors"]
        rewards = {name: r["score"] for name, r in trace["rewards"].items()}
        assert set(rewards) == {"process", "outcome"} and all(isinstance(v, float) for v in rewards.values())
        assert -1.0 <= rewards["outcome"] <= 1.0 and rewards["outcome"] > -1.0  # the episode ended with lab results
        assert trace["metrics"]["n_lab_results"] == 2.0 and trace["metrics"]["n_invalid_actions"] == 0.0
        assert trace["stop_condition"] == "episode_ended"
        # the same actions on the environment core, in process, earn the same return: the rewards are the rubric's
        assert rewards["process"] + rewards["outcome"] == pytest.approx(_core_return(trace["task"]["data"]), abs=1e-9)
    # every model request advertised the four tools, and the proposals went through them
    tools = {t["function"]["name"] for t in model.requests[0]["tools"]}
    assert tools == {"campaign_propose", "campaign_run_rung", "campaign_query_surrogate", "campaign_query_ledger"}
    assert len(model.requests) >= 2 * 3  # per episode: query the ledger, propose twice
