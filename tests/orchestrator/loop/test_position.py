"""orchestrator.loop.position: which events a graph node wrote (``step_of``)."""

from __future__ import annotations

import pytest

from orchestrator.loop.position import step_of
from vocabulary.events import Event


def _event(kind: str, key: str, actor: str, payload: dict) -> Event:
    return Event(campaign_id="c", seq=7, type=kind, schema_version=1, payload=payload, idempotency_key=f"c:{key}",
                 actor=actor, at="2026-01-01T00:00:00Z")


@pytest.mark.parametrize(("kind", "key", "payload"), [
    # an RL environment's tool call runs a rung between the graph's runs: not the screen node's record, so the
    # checkpoint that has not seen it is not 'behind' (else the next propose is put back at the screen, unplanned)
    ("Simulated", "it2:env-rung:descriptors:X", {"iteration": 2, "candidate_id": "X", "rung": "descriptors"}),
    ("EnvironmentStep", "env-step:4", {"iteration": 2, "step": 4}),
])
def test_an_environment_steps_records_are_written_outside_the_graph(kind, key, payload):
    assert step_of(_event(kind, key, "policy:env", payload)) is None


def test_the_graphs_own_records_keep_their_node():
    screened = {"iteration": 2, "candidate_id": "X", "rung": "descriptors"}
    assert step_of(_event("Simulated", "it2:sim:descriptors:X", "screen", screened)) == ("screen", 2)
    approved = {"iteration": 2, "job_keys": []}
    assert step_of(_event("Approved", "it2:approved", "policy:auto", approved)) == ("approve", 2)
