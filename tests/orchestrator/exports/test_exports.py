"""Trajectory exports load in their trainers' libraries and keep the ledger's rewards through the round trip."""

from __future__ import annotations

import json
import re

import pytest

from orchestrator.exports import FORMATS, export_campaign, trajectory_records
from orchestrator.loop.campaign import Campaign
from orchestrator.loop.nodes.reward import stored_rewards
from orchestrator.spec import validate_spec
from tests.conftest import small_spec
from vocabulary.domain import SetupError

GAFF = {"name": "gaff", "simulator": "table", "column": "calc", "property": "dg_hydration_gaff",
        "proxy": "dg_hydration_gaff"}


@pytest.fixture(scope="module")
def campaign_db(tmp_path_factory):
    data = small_spec(lab_experiments=8).model_dump()
    data["ladder"] = [GAFF]
    data["screening"]["executor"] = "serial"
    data["budget"]["compute_seconds"] = None
    data["planner"].update(main="random", control=None, control_share=0.0)
    db = tmp_path_factory.mktemp("export") / "ledger.db"
    with Campaign.start(validate_spec(data), db=db, campaign_id="ex") as campaign:
        campaign.run()
        stored = {tid: e.payload["reward"] for tid, e in stored_rewards(campaign.ledger.events("ex")).items()}
        records = trajectory_records(campaign.ledger, "ex")
        yield campaign.ledger, stored, records


def test_native_records_are_schema_versioned_with_steps_scores_rewards_and_versions(campaign_db, tmp_path):
    ledger, stored, _ = campaign_db
    [path] = export_campaign(ledger, "ex", "native", tmp_path)
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert path.name == "trajectories.jsonl" and len(rows) == len(stored)
    for row in rows:
        assert (row["type"], row["schema_version"]) == ("trajectory", 1)
        assert row["reward"] == stored[row["trajectory_id"]]
        assert row["status"] in ("provisional", "final")
        assert set(row["rewards"]) >= {"outcome", "process"}
        mix = sum(entry["score"] * entry["weight"] for entry in row["rewards"].values())
        assert mix == pytest.approx(row["reward"])
        assert row["versions"]["rubric_id"] == "default" and len(row["versions"]["rubric_hash"]) == 64
        assert row["steps"][0]["stage"] == "proposal"
        assert {s["criterion_id"] for s in row["steps"][0]["scores"]} >= {"valid_candidate", "novel_candidate"}
    dispatched = [r for r in rows if any(s["stage"] == "outcome" for s in r["steps"])]
    assert dispatched and all(r["lab"]["value"] is not None or r["lab"]["status"] == "failed" for r in dispatched)


def test_trl_grpo_has_a_prompt_and_every_other_column_reaches_reward_functions(campaign_db, tmp_path):
    from datasets import load_dataset
    from trl.data_utils import is_conversational

    _, stored, _ = campaign_db
    path, metadata = export_campaign(campaign_db[0], "ex", "trl-grpo", tmp_path)
    dataset = load_dataset("json", data_files=str(path), split="train")
    assert "prompt" in dataset.column_names and is_conversational(dataset[0])
    assert {"task_id", "rubric_id", "rubric_version", "reference_completion", "recorded_reward", "env_task"} <= set(
        dataset.column_names)
    assert json.loads(metadata.read_text())["reward_function"] == "closedloop.trl:campaign_reward"
    assert all("Candidates on offer" in row["prompt"][-1]["content"] for row in dataset)

    # GRPOTrainer passes every column but prompt/completion to reward functions as keyword lists.
    inputs = list(dataset)
    keys = [key for key in inputs[0] if key not in ["prompt", "completion", "completion_ids"]]
    reward_kwargs = {key: [example[key] for example in inputs] for key in keys}

    def recorded(prompts, completions, recorded_reward, **kwargs):
        return list(recorded_reward)

    rewards = recorded([x["prompt"] for x in inputs], ["" for _ in inputs], **reward_kwargs)
    by_task = dict(zip(reward_kwargs["task_id"], rewards, strict=True))
    assert by_task == {f"ex:{tid}": reward for tid, reward in stored.items()}


def test_trl_stepwise_has_prompt_completions_and_labels(campaign_db, tmp_path):
    from datasets import load_dataset

    _, stored, records = campaign_db
    [path] = export_campaign(campaign_db[0], "ex", "trl-stepwise", tmp_path)
    dataset = load_dataset("json", data_files=str(path), split="train")
    assert {"prompt", "completions", "labels"} <= set(dataset.column_names)
    steps = {r["trajectory_id"]: [s["reward"] for s in r["steps"]] for r in records}
    for row in dataset:
        assert len(row["completions"]) == len(row["labels"]) == len(row["step_rewards"])
        assert all(isinstance(label, bool) for label in row["labels"])
        assert row["labels"] == [r > 0 for r in row["step_rewards"]]
        assert row["step_rewards"] == pytest.approx(steps[row["trajectory_id"]])
        assert row["reward"] == stored[row["trajectory_id"]]


def test_trl_stepwise_never_shows_a_steps_label_to_the_model(campaign_db, tmp_path):
    """The prompt and completions are what the model reads; the label (and what it is computed from: the step's
    reward, potentials, criteria and their reasons, the lab's value) must not be there."""
    from orchestrator.exports.formats import FORMATS

    _, _, records = campaign_db
    canary = "LABEL-CANARY"
    marked = [{**r, "steps": [{**step, "scores": [{**s, "reason": f"{canary} {s['reason']}"} for s in step["scores"]]}
                              for step in r["steps"]]} for r in records]
    [path] = FORMATS["trl-stepwise"](marked, tmp_path)
    rows = {row["trajectory_id"]: row for row in map(json.loads, path.read_text().splitlines())}
    criteria = {s["criterion_id"] for r in records for step in r["steps"] for s in step["scores"]}
    for record in records:
        row = rows[record["trajectory_id"]]
        seen = "\n".join([row["prompt"], *row["completions"]])
        assert canary not in seen and "P(lab success)" not in seen and "reward" not in seen.lower()
        assert not [c for c in criteria if c in seen], "a criterion id is visible to the model"
        numbers = set(re.findall(r"-?\d+\.\d+", " ".join(row["completions"])))
        for step in record["steps"]:
            for number in (step["reward"], step["potential_before"], step["potential_after"]):
                assert not {f"{number:.3f}", f"{number:.2f}", repr(number)} & numbers
        if record["lab"] and record["lab"]["value"] is not None:
            assert f"{record['lab']['value']:g}" not in " ".join(row["completions"])  # the outcome's evidence
        assert len(row["completions"]) == len(row["labels"]) and all(isinstance(x, bool) for x in row["labels"])


def test_verifiers_rows_and_metadata(campaign_db, tmp_path):
    from datasets import load_dataset

    _, stored, _ = campaign_db
    results, metadata = export_campaign(campaign_db[0], "ex", "verifiers", tmp_path)
    dataset = load_dataset("json", data_files=str(results), split="train")
    assert {"example_id", "prompt", "completion", "reward", "metrics", "answer", "info", "timing", "is_completed",
            "is_truncated", "error", "trajectory"} <= set(dataset.column_names)
    for row in dataset:
        assert row["reward"] == stored[row["info"]["trajectory_id"]]
        assert set(row["info"]["rewards"]["outcome"]) == {"score", "weight"}
        assert row["metrics"]["outcome"] == row["info"]["rewards"]["outcome"]["score"]
    meta = json.loads(metadata.read_text())
    assert meta["num_examples"] == len(stored)
    assert meta["avg_reward"] == pytest.approx(sum(stored.values()) / len(stored))


def test_hf_dataset_round_trips_through_disk(campaign_db, tmp_path):
    from datasets import load_from_disk

    _, stored, records = campaign_db
    [path] = export_campaign(campaign_db[0], "ex", "hf", tmp_path)
    dataset = load_from_disk(str(path))
    assert len(dataset) == len(records)
    assert {row["trajectory_id"]: row["reward"] for row in dataset} == stored
    assert dataset[0]["rewards"]["outcome"]["weight"] == records[0]["rewards"]["outcome"]["weight"]
    assert json.loads(dataset[0]["candidate"]) == records[0]["candidate"]


def test_bad_format_and_unknown_campaign_are_explained(campaign_db, tmp_path):
    from orchestrator.ledger import LedgerError

    ledger = campaign_db[0]
    with pytest.raises(SetupError, match="unknown; use one of"):
        export_campaign(ledger, "ex", "parquet", tmp_path)
    with pytest.raises(LedgerError, match="not in"):
        export_campaign(ledger, "ghost", "native", tmp_path)
    assert sorted(FORMATS) == ["hf", "native", "trl-grpo", "trl-stepwise", "verifiers"]


# ------------------------------------------------------------------------------------------------ output paths
def test_an_export_onto_its_earlier_files_needs_force_and_never_replaces_a_link(campaign_db, tmp_path):
    import os

    from orchestrator.ledger.outputs import OutputPathError

    ledger = campaign_db[0]
    [path] = export_campaign(ledger, "ex", "native", tmp_path)
    first = path.read_bytes()
    with pytest.raises(OutputPathError, match="already exists; pass --force"):
        export_campaign(ledger, "ex", "native", tmp_path)
    assert export_campaign(ledger, "ex", "native", tmp_path, force=True) == [path] and path.read_bytes() == first
    assert sorted(p.name for p in tmp_path.iterdir()) == ["trajectories.jsonl"]  # no scratch left behind

    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    links = tmp_path / "links"
    links.mkdir()
    os.symlink(victim, links / "trajectories.jsonl")
    with pytest.raises(OutputPathError, match="symbolic link"):
        export_campaign(ledger, "ex", "native", links, force=True)
    assert victim.read_text() == "keep" and (links / "trajectories.jsonl").is_symlink()

    os.mkfifo(tmp_path / "fifo")
    for out in (victim, tmp_path / "fifo"):
        with pytest.raises(OutputPathError, match="not a directory"):
            export_campaign(ledger, "ex", "native", out)


def test_a_refused_file_publishes_none_of_the_others(campaign_db, tmp_path):
    from orchestrator.ledger.outputs import OutputPathError

    (tmp_path / "metadata.json").mkdir()  # results.jsonl would be free, metadata.json is not ours to replace
    with pytest.raises(OutputPathError, match="is a directory"):
        export_campaign(campaign_db[0], "ex", "verifiers", tmp_path)
    with pytest.raises(OutputPathError, match="is a directory"):
        export_campaign(campaign_db[0], "ex", "verifiers", tmp_path, force=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["metadata.json"]


def test_closedloop_export_onto_a_file_is_one_error_line(campaign_db, tmp_path):
    from pathlib import Path

    from typer.testing import CliRunner

    from orchestrator.interfaces.cli import app

    db = Path(campaign_db[0].engine.url.database)
    out = tmp_path / "export"
    out.write_text("a file")
    result = CliRunner().invoke(app, ["export", "ex", "--db", str(db), "--out", str(out)])
    lines = result.output.strip().splitlines()
    assert result.exit_code == 2 and len(lines) == 1 and "is a regular file, not a directory" in lines[0], result.output
    assert out.read_text() == "a file"


def test_an_hf_export_replaces_only_a_dataset_folder(campaign_db, tmp_path):
    from orchestrator.ledger.outputs import OutputPathError

    [path] = export_campaign(campaign_db[0], "ex", "hf", tmp_path)
    with pytest.raises(OutputPathError, match="already exists"):
        export_campaign(campaign_db[0], "ex", "hf", tmp_path)
    assert export_campaign(campaign_db[0], "ex", "hf", tmp_path, force=True) == [path]
    foreign = tmp_path / "other"
    (foreign / "dataset").mkdir(parents=True)
    (foreign / "dataset" / "thesis.tex").write_text("keep")
    with pytest.raises(OutputPathError, match="closedloop did not write"):
        export_campaign(campaign_db[0], "ex", "hf", foreign, force=True)
    assert (foreign / "dataset" / "thesis.tex").read_text() == "keep"
