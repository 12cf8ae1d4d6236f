"""Writers for each export format, all views of the native trajectory records.

- ``native``: ``trajectories.jsonl``, one schema-versioned trajectory per line.
- ``trl-grpo``: ``train.jsonl`` for TRL's ``GRPOTrainer``: a conversational ``prompt`` column; every other column
  (task id, rubric id and version, the recorded answer and lab value as references, the reward) reaches the reward
  functions as a keyword argument.
- ``trl-stepwise``: ``train.jsonl`` in TRL's stepwise-supervision form, ``{prompt, completions, labels}`` with one
  completion per step and ``labels`` true where the step's reward is positive; ``step_rewards`` keeps the floats.
- ``verifiers``: ``results.jsonl`` rows as verifiers writes them (``example_id, prompt, completion, reward,
  metrics, answer, info, timing, is_completed, is_truncated, error, trajectory``) and ``metadata.json`` beside.
- ``hf``: the native records as a Hugging Face ``datasets.Dataset`` saved with ``save_to_disk`` in ``dataset/``.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from ..domain import import_optional

__all__ = ["FORMATS", "ExportFormat", "write_format"]

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


def _grpo(records: list[dict[str, Any]], out: Path) -> list[Path]:
    rows = [{
        "prompt": _messages(r["prompt"]),
        "task_id": f"{r['campaign_id']}:{r['trajectory_id']}",
        "campaign_id": r["campaign_id"],
        "arm": r["arm"],
        "rubric_id": r["versions"]["rubric_id"],
        "rubric_version": r["versions"]["rubric_version"],
        "rubric_hash": r["versions"]["rubric_hash"],
        "reference_completion": r["completion"],
        "reference_value": r["lab"]["value"] if r["lab"] else None,
        "recorded_reward": r["reward"],
        "reward_status": r["status"],
        "schema_version": r["schema_version"],
    } for r in records]
    return [_write_jsonl(out / "train.jsonl", rows)]


def _step_text(step: dict[str, Any]) -> str:
    reasons = "; ".join(f"{s['criterion_id']}: {s['reason']}" for s in step["scores"]) or "no criterion applied"
    return (f"[{step['stage']} {step['subject']}] {reasons}; calibrated P(lab success) "
            f"{step['potential_before']:.3f} -> {step['potential_after']:.3f}")


def _stepwise(records: list[dict[str, Any]], out: Path) -> list[Path]:
    rows = [{
        "prompt": r["prompt"] + ("\n" + r["completion"] if r["completion"] else ""),
        "completions": [_step_text(step) for step in r["steps"]],
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
        "answer": "" if not r["lab"] or r["lab"]["value"] is None else repr(r["lab"]["value"]),
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


def write_format(fmt: str, records: list[dict[str, Any]], out: Path) -> list[Path]:
    """Write ``records`` as ``fmt`` into ``out`` (created if needed); returns the paths written."""
    out.mkdir(parents=True, exist_ok=True)
    return FORMATS[fmt](records, out)
