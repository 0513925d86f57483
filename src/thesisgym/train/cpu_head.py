"""The LM head TRL's trainers call on CPU, projecting only the tokens that carry a loss.

TRL (>= 1.x) patches the policy with a "fused" LM head (`trl.trainer.utils.add_fused_lm_head`) so the
`(batch, seq, vocab)` logits are never materialised. On a GPU it scores only the positions whose label is
not -100; everywhere else it scores EVERY position (to keep tile shapes fixed for compilers) and folds
49k-wide tiles with a dozen elementwise passes in fp32. For a prompt of ~700 tokens and a thesis of ~300,
two thirds of that work is thrown away: measured on this project's CPU (bench/bench_train.py), the head
alone cost more than the transformer body of a SmolLM2 step.

`use_compact_head(model, ...)` re-patches the model the trainer holds with the same interface
(`model(..., labels=, fused_lm_head=True)` -> `FusedCausalLMOutput`, per-token fields zero on ignored
positions) computed the plain way on the labelled positions only: one matmul under the trainer's autocast,
a float32 log-softmax. Numbers equal TRL's up to float rounding (tests/test_train.py compares them). Calls
without `fused_lm_head` (generation) and cases this head does not cover (pre-shifted labels, MoE router
losses, logit soft-capping or scaling) go to TRL's own head unchanged.

`FusedCausalLMOutput` and the fused forward are TRL internals, so the patch is gated on what the
installed TRL provides, not on its version: the output class must exist with the fields filled here
(the others need defaults), and the model's forward must be TRL's fused one (it takes `fused_lm_head`,
`labels`, `shift_labels`, `num_items_in_batch`). TRL 1.0, the floor, has neither: its trainers take
`model(...).logits` and the model is left alone.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from typing import Any

__all__ = ["compact_heads_on_cpu", "fused_output_type", "use_compact_head"]

_SUPPORTED_OUTPUTS = frozenset({"log_probs", "entropy", "is_top1"})
_FILLED_FIELDS = frozenset({"loss", "log_probs", "entropy", "is_top1", "label_mask"})
_FUSED_FORWARD_ARGS = frozenset({"fused_lm_head", "labels", "shift_labels", "num_items_in_batch"})


def fused_output_type(model: Any) -> type | None:
    """TRL's `FusedCausalLMOutput` when the installed TRL has the fused head this module replaces and has
    patched `model` with it (see the module docstring); None when anything of that is missing."""
    try:
        from trl.trainer.utils import FusedCausalLMOutput
    except ImportError:
        return None
    if not dataclasses.is_dataclass(FusedCausalLMOutput):
        return None
    fields = dataclasses.fields(FusedCausalLMOutput)
    unfilled_need_value = any(f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
                              for f in fields if f.name not in _FILLED_FIELDS)
    if not _FILLED_FIELDS.issubset(f.name for f in fields) or unfilled_need_value:
        return None
    try:
        # not follow_wrapped: TRL wraps the original forward (functools.wraps), whose signature lacks these
        params = inspect.signature(model.forward, follow_wrapped=False).parameters
    except (TypeError, ValueError):
        return None
    return FusedCausalLMOutput if _FUSED_FORWARD_ARGS.issubset(params) else None


def _plain_head(model: Any) -> bool:
    """True when the model's next-token logits are exactly `lm_head(hidden)` (no scaling, no soft-cap)."""
    cfg = model.config.get_text_config()
    scaled = any(getattr(cfg, name, None) not in (None, 1.0) for name in
                 ("final_logit_softcapping", "logit_scale", "output_multiplier", "lm_head_multiplier", "logits_scaling"))
    return not scaled and not getattr(cfg, "output_router_logits", False)


def use_compact_head(model: Any, *, temperature: float = 1.0, outputs: tuple[str, ...] = ("log_probs",)) -> bool:
    """Patch `model` (the one TRL patched: the base model under a PEFT wrapper) to score labelled tokens only.

    Returns False (and leaves the model alone) when the installed TRL or the model lacks the fused head
    (`fused_output_type`), the model's head is not a plain projection, or an output is asked for that this
    head does not compute.
    """
    output_type = fused_output_type(model)
    if output_type is None or not _plain_head(model) or not set(outputs) <= _SUPPORTED_OUTPUTS:
        return False
    trl_forward = model.forward  # TRL's fused forward: kept for everything this head does not cover
    inv_t = 1.0 / temperature

    @functools.wraps(type(model).forward)
    def forward(self, *args, fused_lm_head=False, labels=None, shift_labels=None, num_items_in_batch=None, **kwargs):
        if not fused_lm_head or shift_labels is not None or kwargs.get("output_router_logits"):
            return trl_forward(*args, fused_lm_head=fused_lm_head, labels=labels, shift_labels=shift_labels,
                               num_items_in_batch=num_items_in_batch, **kwargs)
        import torch

        kwargs["use_cache"] = False
        hidden = self.base_model(*args, **kwargs).last_hidden_state[:, :-1]
        labels = labels[:, 1:].to(hidden.device)
        mask = labels != -100
        target = labels[mask]
        logits = self.get_output_embeddings()(hidden[mask]).float() * inv_t
        logp = torch.log_softmax(logits, dim=-1)
        picked = logp.gather(-1, target.unsqueeze(-1)).squeeze(-1)

        def spread(x):  # back to (batch, seq - 1), zero where the label is ignored, still connected to the graph
            return x.new_zeros(mask.shape).masked_scatter(mask, x)

        log_probs = spread(picked)
        entropy = spread(-(logp.exp() * logp).sum(-1)) if "entropy" in outputs else None
        is_top1 = None
        if "is_top1" in outputs:
            with torch.no_grad():  # argmax returns the first maximum, as TRL's tie rule does
                is_top1 = torch.zeros_like(mask).masked_scatter(mask, logits.argmax(-1) == target)
        denom = mask.sum().clamp(min=1) if num_items_in_batch is None else num_items_in_batch
        return output_type(loss=-log_probs.sum() / denom, log_probs=log_probs, entropy=entropy,
                           is_top1=is_top1, label_mask=mask)

    import types

    model.forward = types.MethodType(forward, model)
    return True


def compact_heads_on_cpu(trainer: Any, *, outputs: tuple[str, ...], temperature: float = 1.0) -> bool:
    """`use_compact_head` on the policy (and the reference model, if any) of a TRL trainer running on CPU."""
    if trainer.args.device.type != "cpu":
        return False
    from peft import PeftModel

    policy = trainer.model.get_base_model() if isinstance(trainer.model, PeftModel) else trainer.model
    done = use_compact_head(policy, temperature=temperature, outputs=outputs)
    ref = getattr(trainer, "ref_model", None)
    if done and ref is not None:
        use_compact_head(ref, temperature=temperature, outputs=("log_probs",))
    return done
