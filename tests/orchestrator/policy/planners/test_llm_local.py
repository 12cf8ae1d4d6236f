"""The llm planner arm with real models: the embedded SmolLM2 GGUF in-process, and the same model behind
llama-cpp-python's OpenAI-compatible server reached through langchain-openai."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request

import numpy as np
import pytest

from orchestrator.policy.planners import PlanningContext, fit_surrogate_state
from orchestrator.policy.planners.llm import LLMPlanner
from orchestrator.policy.planners.llm_models import embedded_model_path, load_chat_model
from orchestrator.policy.planners.llm_prompt import HYPOTHESIS_PATTERN, ProposalBatch
from orchestrator.policy.planners.llm_recording import InMemoryLLMRecorder
from orchestrator.space.pool import load_pool
from orchestrator.spec import load_spec
from tests.conftest import BUCHWALD_SPEC, FREESOLV_SPEC

pytestmark = pytest.mark.slow


def make_context(spec, *, n_observed: int, surrogate: bool, seed: int = 0, iteration: int = 2) -> PlanningContext:
    pool = load_pool(spec)
    observed = np.sort(np.random.default_rng(seed).choice(len(pool), size=n_observed, replace=False))
    utilities = np.asarray([spec.objective.utility(v) for v in pool.columns[spec.lab.oracle_column][observed]])
    state = None
    if surrogate:
        kernel = "tanimoto" if spec.campaign.kind == "molecule" else "matern52"
        state = fit_surrogate_state(pool.features[observed], utilities, kernel=kernel, seed=0)
    available = np.setdiff1d(np.arange(len(pool)), observed)
    return PlanningContext(spec=spec, pool=pool, iteration=iteration, available=available, observed=observed,
                           utilities=utilities, pending=np.zeros(0, dtype=int), surrogate_state=state, seed=seed)


def assert_valid_batch(context: PlanningContext, proposals, n: int) -> None:
    ids = [p.candidate.id for p in proposals]
    assert len(ids) == n and len(set(ids)) == n
    available = {context.pool.ids[i] for i in context.available}
    assert set(ids) <= available


@pytest.mark.parametrize("spec_path, n_observed, surrogate", [(FREESOLV_SPEC, 10, True), (BUCHWALD_SPEC, 5, False)],
                         ids=["freesolv-with-surrogate", "buchwald-cold-start"])
def test_the_embedded_model_proposes_valid_pool_members_as_parsed_json(spec_path, n_observed, surrogate):
    context = make_context(load_spec(spec_path), n_observed=n_observed, surrogate=surrogate)
    recorder = InMemoryLLMRecorder()
    planner = LLMPlanner(recorder=recorder)
    proposals = planner.propose(context, 3)

    assert_valid_batch(context, proposals, 3)
    assert all(p.arm == "llm" and not p.is_fallback for p in proposals[: planner.last_run["n_valid"]])
    assert planner.last_run["n_valid"] >= 1, "at least one pick is the model's own"
    assert recorder.calls, "the model was not called"
    hypotheses = set()
    for call in recorder.calls.values():  # grammar-constrained: every answer is JSON following the schema
        batch = ProposalBatch.model_validate(json.loads(call["response"]))
        assert re.fullmatch(HYPOTHESIS_PATTERN, batch.hypothesis), "the model wrote its own bounded hypothesis"
        hypotheses.add(batch.hypothesis)
        assert call["model"] == "embedded:SmolLM2-135M-Instruct.Q4_1.gguf"
        assert call["n_prompt_tokens"] > 0 and call["n_completion_tokens"] > 0 and call["latency_s"] > 0
    assert all(p.hypothesis in hypotheses for p in proposals), "the proposals carry the model's words"
    assert all(p.is_bo_pick is not None for p in proposals)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def openai_server():
    """llama-cpp-python's OpenAI-compatible server with the embedded model on 127.0.0.1."""
    port = _free_port()
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    process = subprocess.Popen(
        [sys.executable, "-m", "llama_cpp.server", "--model", str(embedded_model_path()), "--host", "127.0.0.1",
         "--port", str(port), "--n_threads", "1", "--n_threads_batch", "1", "--n_ctx", "8192", "--verbose", "False"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env,
    )
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 120
        while True:
            if process.poll() is not None:
                pytest.fail(f"llama_cpp.server exited: {process.stderr.read().decode()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{base_url}/models", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail("llama_cpp.server did not answer /v1/models within 120 s")
                time.sleep(0.5)
        yield base_url
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def test_the_openai_provider_path_through_a_local_openai_compatible_server(openai_server, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-local-test")
    context = make_context(load_spec(FREESOLV_SPEC), n_observed=10, surrogate=True, iteration=5)
    model = load_chat_model(f"openai:smollm2@{openai_server}", temperature=0.0, seed=0, max_tokens=512)
    recorder = InMemoryLLMRecorder()
    # Restricting to shortlist ids puts them in the function's schema; the server turns it into a grammar.
    planner = LLMPlanner(chat_model=model, recorder=recorder, restrict_to_shortlist=True)
    proposals = planner.propose(context, 2)

    assert_valid_batch(context, proposals, 2)
    assert planner.last_run["n_fallback"] == 0
    call = recorder.calls["it5:llm:0"]
    ProposalBatch.model_validate(json.loads(call["response"]))
    assert call["model"] == "openai-chat:smollm2" and call["parameters"]["base_url"] == openai_server
    assert call["n_prompt_tokens"] > 0
    assert "sk-local-test" not in json.dumps(recorder.calls)


def test_the_embedded_chat_model_gives_schema_constrained_structured_output():
    from pydantic import BaseModel, Field

    class Pick(BaseModel):
        colour: str = Field(json_schema_extra={"enum": ["red", "green", "blue"]})
        confidence: float

    model = load_chat_model("embedded", max_tokens=64)
    result = model.with_structured_output(Pick, include_raw=True).invoke("Pick a colour of the sky and say how sure you are.")
    assert result["parsing_error"] is None and isinstance(result["parsed"], Pick)
    assert result["parsed"].colour in {"red", "green", "blue"}
    assert result["raw"].usage_metadata["output_tokens"] > 0
