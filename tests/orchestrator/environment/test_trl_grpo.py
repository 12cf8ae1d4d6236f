"""TRL's GRPOTrainer, run for real on CPU and offline, on the trl-grpo export of a real small campaign.

The model is a tiny Llama built from a config (random weights) and the tokenizer a byte-level BPE trained here on
the campaign's own text; the reward function is the one the export's metadata names, which plays each completion
in the campaign environment (rubric and simulated lab). The test asserts what GRPO needs to learn anything: rewards
that vary within a group, and an optimiser step that changed the weights.
"""

from __future__ import annotations

import importlib
import json
import os

import pytest

for _name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
    os.environ.setdefault(_name, "1")
os.environ.setdefault("WANDB_DISABLED", "true")

from orchestrator.environment.grpo import REWARD_FLOOR  # noqa: E402
from orchestrator.exports import export_campaign  # noqa: E402
from orchestrator.loop.campaign import Campaign  # noqa: E402
from orchestrator.spec import validate_spec  # noqa: E402
from tests.conftest import small_spec  # noqa: E402

pytest.importorskip("trl")

GAFF = {"name": "gaff", "simulator": "table", "column": "calc", "property": "dg_hydration_gaff",
        "proxy": "dg_hydration_gaff"}
N_GENERATIONS = 8
VOCAB = 1000  # a cap: the campaign's text yields about 480 tokens, each offer label "o03:" one of them
SPECIALS = ["<pad>", "<eos>", "<unk>", "<|system|>", "<|user|>", "<|assistant|>", "<|end|>"]
CHAT_TEMPLATE = ("{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}<|end|>{% endfor %}"
                 "{% if add_generation_prompt %}<|assistant|>{% endif %}")


@pytest.fixture(scope="module")
def export(tmp_path_factory):
    """A FreeSolv campaign (random arm, GAFF table rung, 4 lab experiments in 2 rounds) exported as trl-grpo."""
    data = small_spec(lab_experiments=4).model_dump()
    data["ladder"] = [GAFF]
    data["screening"]["executor"] = "serial"
    data["budget"]["compute_seconds"] = None
    data["planner"].update(main="random", control=None, control_share=0.0, proposals_per_slot=1, batch_size=2,
                           n_initial=2)
    root = tmp_path_factory.mktemp("grpo")
    with Campaign.start(validate_spec(data), db=root / "ledger.db", campaign_id="grpo") as campaign:
        campaign.run()
        train, metadata = export_campaign(campaign.ledger, "grpo", "trl-grpo", root / "export")
    return train, json.loads(metadata.read_text())


def test_the_export_carries_real_prompts_and_names_its_reward_function(export):
    from datasets import load_dataset
    from trl.data_utils import is_conversational

    train, metadata = export
    dataset = load_dataset("json", data_files=str(train), split="train")
    assert is_conversational(dataset[0]) and len(dataset) >= 4
    assert metadata["reward_function"] == "closedloop.trl:campaign_reward"
    module, name = metadata["reward_function"].split(":")
    reward = getattr(importlib.import_module(module), name)
    for row in dataset:
        text = row["prompt"][-1]["content"]
        task = json.loads(row["env_task"])
        assert "Candidates on offer" in text and "Propose 1 candidate(s)" in text
        assert len(task["offer"]) == len(row["offer_ids"]) == 8
        for label, cid in zip(task["labels"], task["offer"], strict=True):
            assert f"{label}: " in text and cid in row["offer_ids"]
        assert row["reference_label"] in task["labels"]  # the campaign's own pick is on offer
    later = [row for row in dataset if row["iteration"] > 0]
    assert later and all("Lab results so far:" in row["prompt"][-1]["content"] for row in later)

    row = dataset[0]
    good = f'{{"type": "propose", "candidate_ids": ["{row["reference_label"]}"], "hypothesis": "the pick"}}'
    scores = reward([row["prompt"]] * 3, [[{"role": "assistant", "content": c}] for c in
                                          (good, "no candidate here", '{"type": "query_surrogate"}')],
                    env_task=[row["env_task"]] * 3)
    assert scores[0] > REWARD_FLOOR and scores[1:] == [REWARD_FLOOR, REWARD_FLOOR]
    assert reward([row["prompt"]], [good], env_task=[row["env_task"]]) == scores[:1]  # deterministic


def _tokenizer(texts):
    """A BPE over whitespace-separated words (so an offer label like ``o03:`` can be one token), trained on
    ``texts``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.BPE(unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Metaspace()
    core.decoder = decoders.Metaspace()
    core.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=SPECIALS))
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<pad>", eos_token="<eos>",
                                        unk_token="<unk>", additional_special_tokens=SPECIALS[3:])
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def test_grpo_trains_a_tiny_model_on_the_campaign_with_rewards_that_vary_within_groups(export, tmp_path):
    import torch
    from datasets import load_dataset
    from transformers import LlamaConfig, LlamaForCausalLM
    from trl import GRPOConfig, GRPOTrainer

    train, metadata = export
    dataset = load_dataset("json", data_files=str(train), split="train")
    module, name = metadata["reward_function"].split(":")
    reward = getattr(importlib.import_module(module), name)
    texts = [m["content"] for row in dataset for m in row["prompt"]] + [row["reference_completion"] for row in dataset]
    tokenizer = _tokenizer(texts)

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=2048,
                         pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
                         bos_token_id=None, tie_word_embeddings=True)
    model = LlamaForCausalLM(config)
    before = {k: v.detach().clone() for k, v in model.named_parameters()}

    groups: list[list[float]] = []

    def campaign_reward(prompts, completions, env_task, **kwargs):
        scores = reward(prompts, completions, env_task=env_task, **kwargs)
        groups.extend(scores[i:i + N_GENERATIONS] for i in range(0, len(scores), N_GENERATIONS))
        return scores

    args = GRPOConfig(output_dir=str(tmp_path / "out"), max_steps=2, per_device_train_batch_size=N_GENERATIONS,
                      num_generations=N_GENERATIONS, max_completion_length=24, learning_rate=5e-3, beta=0.0,
                      temperature=1.0, logging_steps=1, save_strategy="no", report_to="none", use_cpu=True,
                      use_vllm=False, seed=0, dataloader_num_workers=0, disable_tqdm=True)
    trainer = GRPOTrainer(model=model, reward_funcs=campaign_reward, args=args, train_dataset=dataset,
                          processing_class=tokenizer)
    trainer.train()

    assert trainer.state.global_step >= 1
    changed = [k for k, v in model.named_parameters() if not torch.equal(v.detach(), before[k])]
    assert changed, "no parameter changed: the optimiser step did not happen"
    assert groups and all(len(g) == N_GENERATIONS for g in groups)
    spread = [max(g) - min(g) for g in groups]
    assert any(s > 0 for s in spread), f"every group's rewards were equal: {groups}"
    logged = [entry for entry in trainer.state.log_history if "reward_std" in entry]
    assert logged and max(entry["reward_std"] for entry in logged) > 0
    assert all(REWARD_FLOOR <= r <= 2.0 for g in groups for r in g)
