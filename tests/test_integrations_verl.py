"""thesisgym's verl reward function inside verl's own reward managers (needs `pip install thesisgym[verl]`).

verl (0.9.1 on CPU) is an optional extra: it pins an older transformers, so the default test
environment does not install it and this module skips. With it installed, the rows written by
`thesisgym export --format verl` go through verl's `get_custom_reward_fn` (config
`reward.custom_reward_function` with `pkg://`), `NaiveRewardManager`, `BatchRewardManager` and
the reward-loop `NaiveRewardManager.run_single`, on a `DataProto` built as verl's trainer builds
it (prompt/response token ids, attention mask, non-tensor `reward_model` / `extra_info`).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from test_rewards_fixtures import assemble, gold_thesis, make_row
from thesisgym.integrations import core, verl
from thesisgym.integrations.core import ground_truth_json

verl_lib = pytest.importorskip("verl", reason="verl is an optional extra: pip install 'thesisgym[verl]'")
torch = pytest.importorskip("torch")


class CharTokenizer:
    """A tokenizer whose ids are code points: decode(encode(s)) == s, enough for a reward manager."""

    def encode(self, text: str) -> list[int]:
        return [ord(ch) for ch in text]

    def decode(self, ids, skip_special_tokens: bool = True) -> str:
        return "".join(chr(int(i)) for i in ids if int(i) > 0)


def _data_proto(completions: list[str], rows: list[dict], recipe: str | None):
    from verl import DataProto

    tok = CharTokenizer()
    prompt_len = 8
    resp_len = max(len(c) for c in completions) + 4
    prompts = torch.zeros(len(completions), prompt_len, dtype=torch.long)
    responses = torch.zeros(len(completions), resp_len, dtype=torch.long)
    mask = torch.zeros(len(completions), prompt_len + resp_len, dtype=torch.long)
    for i, c in enumerate(completions):
        p = tok.encode("prompt:")
        prompts[i, prompt_len - len(p):] = torch.tensor(p)  # left-padded prompt, as verl's rollout
        mask[i, prompt_len - len(p):prompt_len] = 1
        ids = tok.encode(c)
        responses[i, :len(ids)] = torch.tensor(ids)
        mask[i, prompt_len:prompt_len + len(ids)] = 1
    exported = [verl.export_row(r, split="train", index=i, recipe=recipe) for i, r in enumerate(rows)]
    non_tensors = {
        "data_source": np.array([e["data_source"] for e in exported], dtype=object),
        "reward_model": np.array([e["reward_model"] for e in exported], dtype=object),
        "extra_info": np.array([e["extra_info"] for e in exported], dtype=object),
    }
    return DataProto.from_dict(
        tensors={"prompts": prompts, "responses": responses, "attention_mask": mask,
                 "input_ids": torch.cat([prompts, responses], dim=1)},
        non_tensors=non_tensors,
    ), tok, resp_len


def _custom_fn(name: str, reward_kwargs: dict | None = None):
    from omegaconf import OmegaConf
    from verl.trainer.ppo.reward import get_custom_reward_fn

    config = OmegaConf.create({"reward": {"custom_reward_function": {
        "path": "pkg://thesisgym.integrations.verl", "name": name, "reward_kwargs": reward_kwargs or {}}}})
    return get_custom_reward_fn(config)


COMPLETIONS = [gold_thesis(), assemble(decision="SELL"), gold_thesis().replace("[T1]", "[T9]"), "junk BUY"]


@pytest.mark.parametrize("recipe", ["dsr", "trading_r1"])
def test_naive_and_batch_reward_managers_score_like_thesisgym(recipe):
    from verl.workers.reward_manager.batch import BatchRewardManager
    from verl.workers.reward_manager.naive import NaiveRewardManager

    rows = [make_row(), make_row(label="SELL", fwd_return=-0.03), make_row(), make_row()]
    expected = [core.score_one(c, r, recipe)["score"] for c, r in zip(COMPLETIONS, rows, strict=True)]
    data, tok, _ = _data_proto(COMPLETIONS, rows, recipe=None)

    naive = NaiveRewardManager(tok, num_examine=0, compute_score=_custom_fn("compute_score", {"recipe": recipe}))
    out = naive(data, return_dict=True)
    got = [out["reward_tensor"][i, len(c) - 1].item() for i, c in enumerate(COMPLETIONS)]
    assert got == pytest.approx(expected, abs=1e-5)
    assert out["reward_extra_info"]["evidence"][0] == 1.0 and len(out["reward_extra_info"]["score"]) == 4

    data, tok, _ = _data_proto(COMPLETIONS, rows, recipe=recipe)  # recipe from extra_info this time
    batch = BatchRewardManager(tok, num_examine=0, compute_score=_custom_fn("compute_score_batch"))
    out = batch(data, return_dict=True)
    got = [out["reward_tensor"][i, len(c) - 1].item() for i, c in enumerate(COMPLETIONS)]
    assert got == pytest.approx(expected, abs=1e-5)
    assert len(set(got)) >= 3  # distinct scores: the equality above is not all-equal


def test_reward_loop_manager_run_single():
    from omegaconf import OmegaConf
    from verl.experimental.reward_loop.reward_manager.naive import NaiveRewardManager

    rows = [make_row()]
    data, tok, _ = _data_proto([gold_thesis()], rows, recipe="fsr")
    manager = NaiveRewardManager(OmegaConf.create({}), tok, compute_score=_custom_fn("compute_score"))
    result = manager.loop.run_until_complete(manager.run_single(data))
    assert result["reward_score"] == pytest.approx(core.score_one(gold_thesis(), rows[0], "fsr")["score"])
    assert json.loads(data[0].non_tensor_batch["reward_model"]["ground_truth"]) == json.loads(
        ground_truth_json(rows[0]))
