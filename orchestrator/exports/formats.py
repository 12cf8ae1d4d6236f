"""Writers for each export format, all views of the native trajectory records.

- ``native``: ``trajectories.jsonl``, one schema-versioned trajectory per line.
- ``trl-grpo``: ``train.jsonl`` for TRL's ``GRPOTrainer`` and ``metadata.json`` beside it. The conversational
  ``prompt`` is the situation the planner faced, rendered by the environment's own observation renderer (objective,
  the candidates on offer, rung and lab results so far, budget left; ``orchestrator.environment.grpo``). Every other
  column reaches the reward functions as a keyword argument: ``env_task`` (what the reward function replays), the
  task id, rubric id and version, the recorded answer and lab value as references, the recorded reward. The metadata
  names the reward function (``closedloop.trl:campaign_reward``), which plays each completion in the environment.
- ``trl-stepwise``: ``train.jsonl`` in TRL's stepwise-supervision form, ``{prompt, completions, labels}`` with one
  completion per step and ``labels`` true where the step's reward is positive; ``step_rewards`` keeps the floats.
  A completion says what the step did (the proposal, the rung run, the dispatch, the lab's measurement), never how
  it was scored: no criterion, reason, potential or reward appears in the prompt or the completions.
- ``verifiers``: ``results.jsonl`` rows as verifiers writes them (``example_id, prompt, completion, reward,
  metrics, answer, info, timing, is_completed, is_truncated, error, trajectory``) and ``metadata.json`` beside.
- ``hf``: the native records as a Hugging Face ``datasets.Dataset`` saved with ``save_to_disk`` in ``dataset/``.

Several objectives: every measured property travels with each result (the native record's ``lab.values``, the
grpo row's ``reference_values``, verifiers' ``answer`` as JSON of them, the hf row's ``lab`` JSON), and the grpo
prompt is the environment's observation, which lists every objective and the measured front.
"""

from __future__ import annotations

import json
import shutil
import statistics
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from orchestrator.ledger.outputs import (
    check_output_path,
    check_output_tree,
    output_dir,
    publish_file,
    publish_tree,
)
from vocabulary.domain import SetupError, import_optional

__all__ = ["FORMATS", "ExportFormat", "write_format"]

_DATASET_MARKER = "dataset_info.json"
"""A file ``datasets.Dataset.save_to_disk`` always writes: a ``dataset/`` folder without it is not an export of ours."""

ExportFormat = Literal["native", "trl-grpo", "trl-stepwise", "verifiers", "hf"]


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    with path.open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n")
    return path


def _messages(text: str, role: str = "user") -> list[dict[str, str]]:
    return [{"role": role, "content": text}]


def _native(records: list[dict[str, Any]], out: Path) -> list[Path]:
    return [_write_jsonl(out / "trajectories.jsonl", records)]


_GRPO_SYSTEM = ("You plan experiments in a closed-loop campaign. Answer with one propose action as JSON naming a "
                "candidate on offer; tool calls are not answered in this one-turn task.")


def _grpo(records: list[dict[str, Any]], out: Path, ledger: Any = None) -> list[Path]:
    from orchestrator.environment.grpo import (
        GRPO_REWARD_FUNCTION,
        N_EXPORT_OFFER,
        REWARD_FLOOR,
        ledger_situations,
    )

    situations = {}
    if records:
        if ledger is None:
            raise SetupError("the trl-grpo export rebuilds each prompt from the campaign's ledger; use "
                             "export_campaign(ledger, campaign_id, 'trl-grpo', out) or pass ledger=")
        situations = ledger_situations(ledger, records[0]["campaign_id"], [r["iteration"] for r in records])
    rows = []
    for r in records:
        situation = situations[r["iteration"]]
        labels = {c.candidate_id: c.label for c in situation.observation.offer}
        rows.append({
            "prompt": [*_messages(_GRPO_SYSTEM, role="system"), *_messages(situation.observation.render())],
            "env_task": json.dumps(situation.env_task, sort_keys=True),
            "offer_ids": list(situation.offer_ids),
            "reference_label": labels.get(r["candidate_id"]),
            "iteration": r["iteration"],
            "task_id": f"{r['campaign_id']}:{r['trajectory_id']}",
            "campaign_id": r["campaign_id"],
            "arm": r["arm"],
            "rubric_id": r["versions"]["rubric_id"],
            "rubric_version": r["versions"]["rubric_version"],
            "rubric_hash": r["versions"]["rubric_hash"],
            "reference_completion": r["completion"],
            "reference_value": r["lab"]["value"] if r["lab"] else None,
            **({"reference_values": r["lab"]["values"]} if r["lab"] and "values" in r["lab"] else {}),
            "recorded_reward": r["reward"],
            "reward_status": r["status"],
            "schema_version": r["schema_version"],
        })
    metadata = {
        "format": "trl-grpo", "schema_version": 1, "num_examples": len(rows),
        "campaign_id": records[0]["campaign_id"] if records else None,
        "reward_function": GRPO_REWARD_FUNCTION, "reward_floor": REWARD_FLOOR, "n_offer": N_EXPORT_OFFER,
        "reward": "the return of a one-experiment CampaignEnvironment episode over env_task's spec, with the row's "
                  "offer, that proposes the completion's candidate (rubric process reward plus the lab outcome); "
                  "a completion naming no candidate on offer earns reward_floor",
    }
    meta = out / "metadata.json"
    meta.write_text(json.dumps(metadata, indent=2, sort_keys=True), encoding="utf-8")
    return [_write_jsonl(out / "train.jsonl", rows), meta]


def _candidate_label(record: dict[str, Any]) -> str:
    candidate = record.get("candidate") or {}
    values = candidate.get("values")
    return (candidate.get("smiles") or candidate.get("formula")
            or ("; ".join(f"{k}={v}" for k, v in values.items()) if values else None) or record["candidate_id"])


def _step_action(step: dict[str, Any], record: dict[str, Any]) -> str:
    """What a step did, in words; how it was scored (criteria, reasons, potentials, rewards) stays out, since a
    stepwise trainer shows this text to the model and the step's label is what it must predict."""
    stage, subject, candidate = step["stage"], step["subject"], _candidate_label(record)
    if stage == "plan":
        return f"plan: the {subject} arm is asked to fill its lab slots"
    if stage == "proposal":
        return f"propose: {record['completion'] or candidate}"
    if stage == "screen":
        return f"screen: {candidate} goes through the campaign's simulation rungs"
    if stage == "dispatch":
        return f"dispatch: {candidate} is sent to the lab as job {subject}"
    if stage == "outcome":
        return f"outcome: the lab measures {candidate} (job {subject})"
    return f"{stage}: {subject}"


def _stepwise(records: list[dict[str, Any]], out: Path) -> list[Path]:
    rows = [{
        "prompt": r["prompt"],
        "completions": [_step_action(step, r) for step in r["steps"]],
        "labels": [step["reward"] > 0 for step in r["steps"]],
        "step_rewards": [step["reward"] for step in r["steps"]],
        "trajectory_id": r["trajectory_id"],
        "reward": r["reward"],
        "reward_status": r["status"],
        "schema_version": r["schema_version"],
    } for r in records]
    return [_write_jsonl(out / "train.jsonl", rows)]


def _verifiers(records: list[dict[str, Any]], out: Path) -> list[Path]:
    rows = [{
        "example_id": index,
        "prompt": _messages(r["prompt"]),
        "completion": _messages(r["completion"], role="assistant"),
        "reward": r["reward"],
        "metrics": {name: entry["score"] for name, entry in r["rewards"].items()},
        "answer": _answer(r["lab"]),
        "info": {"campaign_id": r["campaign_id"], "trajectory_id": r["trajectory_id"], "arm": r["arm"],
                 "rewards": r["rewards"], "status": r["status"], "versions": r["versions"]},
        "timing": {"generation_ms": None, "scoring_ms": None, "total_ms": None},  # not recorded
        "is_completed": r["status"] == "final",
        "is_truncated": False,
        "error": None,
        "trajectory": r["steps"],
    } for index, r in enumerate(records)]
    rewards = [r["reward"] for r in records]
    first = records[0] if records else None
    metadata = {
        "env_id": "closedloop", "campaign_id": first["campaign_id"] if first else None,
        "num_examples": len(records), "rollouts_per_example": 1,
        "avg_reward": statistics.fmean(rewards) if rewards else None,
        "avg_metrics": {name: statistics.fmean(r["rewards"][name]["score"] for r in records)
                        for name in (first["rewards"] if first else {})},
        "reward_weights": {name: entry["weight"] for name, entry in (first["rewards"] if first else {}).items()},
        "rubric": first["versions"] if first else None,
        "schema_version": first["schema_version"] if first else None,
    }
    results = _write_jsonl(out / "results.jsonl", rows)
    meta = out / "metadata.json"
    meta.write_text(json.dumps(metadata, indent=2, sort_keys=True), encoding="utf-8")
    return [results, meta]


def _answer(lab: dict[str, Any] | None) -> str:
    """The verifiers ``answer``: the lab value's repr; every measured property as JSON when there are several."""
    if not lab or lab["value"] is None:
        return ""
    if "values" in lab:
        return json.dumps(lab["values"], sort_keys=True)
    return repr(lab["value"])


def _hf(records: list[dict[str, Any]], out: Path) -> list[Path]:
    Dataset = import_optional("datasets", "rl", "the hf export format").Dataset

    rows = [{**r, "candidate": json.dumps(r["candidate"], sort_keys=True), "lab": json.dumps(r["lab"])}
            for r in records]  # candidate kinds differ in shape; JSON keeps the Arrow schema one shape
    target = out / "dataset"
    Dataset.from_list(rows).save_to_disk(str(target))
    return [target]


FORMATS: dict[str, Callable[[list[dict[str, Any]], Path], list[Path]]] = {
    "native": _native,
    "trl-grpo": _grpo,
    "trl-stepwise": _stepwise,
    "verifiers": _verifiers,
    "hf": _hf,
}


def write_format(fmt: str, records: list[dict[str, Any]], out: Path, *, ledger: Any = None,
                 force: bool = False) -> list[Path]:
    """Write ``records`` as ``fmt`` into ``out`` (created if needed); returns the paths written.

    ``ledger`` (the records' ledger) is needed by ``trl-grpo``, whose prompts are rebuilt from it. The files are
    written into a scratch folder inside ``out`` and published when all are complete (``ledger.outputs``): files of
    an earlier export are replaced only with ``force``; a link, FIFO, device or foreign folder in their place, or an
    ``out`` that is a file or a link, is refused, and then nothing is published.
    """
    out = output_dir(out)
    scratch = Path(tempfile.mkdtemp(prefix=".export.", suffix=".tmp", dir=out))
    try:
        written = _grpo(records, scratch, ledger=ledger) if fmt == "trl-grpo" else FORMATS[fmt](records, scratch)
        targets = [out / path.relative_to(scratch) for path in written]
        for path, target in zip(written, targets, strict=True):  # every check before the first publication
            if path.is_dir():
                check_output_tree(target, force=force, marker=_DATASET_MARKER)
            else:
                check_output_path(target, force=force)
        for path, target in zip(written, targets, strict=True):
            if path.is_dir():
                publish_tree(path, target, force=force, marker=_DATASET_MARKER)
            else:
                publish_file(path, target, force=force)
        return targets
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
