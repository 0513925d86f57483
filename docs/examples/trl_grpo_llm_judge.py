"""GRPO (TRL) with thesisgym's DSR reward whose consistency judge is an LLM served by vLLM (async reward).

TRL runs `async def` rewards concurrently (asyncio.gather on its own event loop), so the judge's
HTTP calls overlap instead of stalling the step; identical judge prompts inside a group share
one request and answers are cached on disk (thesisgym.llm.LLMClient). A failed judge call falls
back to the local deterministic judge for that completion (counted in the logged metrics).

    # 1. the judge: any OpenAI-compatible server, here vLLM on its own GPU
    CUDA_VISIBLE_DEVICES=1 vllm serve Qwen/Qwen3-8B --port 8001 --max-model-len 16384
    # 2. the policy's generation server for GRPO (TRL's vLLM server mode)
    CUDA_VISIBLE_DEVICES=2 trl vllm-serve --model runs/sft/final --port 8000
    # 3. training
    CUDA_VISIBLE_DEVICES=0 python docs/examples/trl_grpo_llm_judge.py --dataset dataset \
        --model runs/sft/final --judge-url http://localhost:8001/v1 --judge-model Qwen/Qwen3-8B

The same run through a recipe: `thesisgym train grpo -c dsr --set rewards.consistency=llm
--set rewards.consistency_options.model=Qwen/Qwen3-8B
--set rewards.consistency_options.base_url=http://localhost:8001/v1
--set rewards.consistency_options.asynchronous=true --set use_vllm=true --set vllm_mode=server`.
"""

from __future__ import annotations

import argparse

from thesisgym.consistency import make_consistency_reward
from thesisgym.rewards import (
    decision_reward,
    evidence_reward,
    loop_penalty,
    make_combined_reward,
    structure_reward,
)


def build_rewards(judge_url: str, judge_model: str) -> tuple[list, list[float]]:
    """(reward_funcs, reward_weights): DSR trained on, the components logged with weight 0."""
    consistency = make_consistency_reward(
        judge="llm", model=judge_model, base_url=judge_url, asynchronous=True, fallback="local"
    )
    dsr = make_combined_reward("dsr", consistency=consistency)  # async, because the judge is
    return [dsr, structure_reward, evidence_reward, decision_reward, loop_penalty], [1.0, 0.0, 0.0, 0.0, 0.0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dataset", required=True, help="directory saved by `thesisgym build`")
    parser.add_argument("--model", required=True, help="SFT checkpoint (also served by `trl vllm-serve`)")
    parser.add_argument("--judge-url", default="http://localhost:8001/v1")
    parser.add_argument("--judge-model", default="Qwen/Qwen3-8B")
    parser.add_argument("--generation-url", default="http://localhost:8000")
    parser.add_argument("--output-dir", default="runs/grpo-llm-judge")
    args = parser.parse_args()

    from datasets import load_from_disk
    from trl import GRPOConfig, GRPOTrainer

    train = load_from_disk(args.dataset)["train"].filter(lambda r: r["label"] is not None)
    funcs, weights = build_rewards(args.judge_url, args.judge_model)
    config = GRPOConfig(
        output_dir=args.output_dir, reward_weights=weights, num_generations=8, per_device_train_batch_size=8,
        max_completion_length=768, learning_rate=1e-5, max_steps=200, logging_steps=1, save_steps=50,
        use_vllm=True, vllm_mode="server", vllm_server_base_url=args.generation_url,
    )
    GRPOTrainer(model=args.model, reward_funcs=funcs, args=config, train_dataset=train).train()


if __name__ == "__main__":
    main()
