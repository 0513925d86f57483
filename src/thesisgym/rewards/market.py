"""Market reward r (Trade-R1): the realised, volatility-normalised return of the position taken.

r = clip(position(decision) * fwd_return / fwd_vol, -clip, clip), with positions from
schema.DEFAULT_POSITIONS (STRONG_SELL -1 ... STRONG_BUY +1) and fwd_return / fwd_vol the row's
columns (REWARD_HORIZON-day return and the matching volatility known at d). Dividing by the
volatility makes rewards comparable across tickers and regimes; clipping (default 3 sigma)
keeps one crash or squeeze from dominating a GRPO group. This is the reward that can be hacked
by lucky calls; combine it with a consistency score (FSR/DSR) rather than using it alone.

Not applicable (None) when fwd_return or fwd_vol is missing, non-finite or fwd_vol <= 0. A
missing or invalid decision gets `missing_penalty` (default -1.0: worse than HOLD's 0, so
omitting the decision never beats abstaining explicitly). Given the `evidence` column, a thesis that
quotes an item's instruction to the model as evidence (`evidence.obeys_instruction`) has no decision of
its own and gets `missing_penalty` too. Range: [-clip, clip].
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from thesisgym.rewards.base import column, evidence_index, log_metric, parsed, per_completion
from thesisgym.rewards.evidence import obeys_instruction
from thesisgym.schema import DEFAULT_POSITIONS, LABELS

__all__ = ["DEFAULT_CLIP", "DEFAULT_MISSING_PENALTY", "make_market_reward", "market_reward", "market_value"]

DEFAULT_CLIP = 3.0
DEFAULT_MISSING_PENALTY = -1.0


def _finite(x: Any) -> float | None:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def market_value(
    decision: str | None,
    fwd_return: Any,
    fwd_vol: Any,
    *,
    positions: Mapping[str, float] = DEFAULT_POSITIONS,
    clip: float = DEFAULT_CLIP,
    missing_penalty: float = DEFAULT_MISSING_PENALTY,
) -> float | None:
    """r for one decision; None when the forward return or volatility is unknown."""
    ret, vol = _finite(fwd_return), _finite(fwd_vol)
    if ret is None or vol is None or vol <= 0:
        return None
    if decision not in positions:
        return missing_penalty
    return max(-clip, min(clip, positions[decision] * ret / vol))


def make_market_reward(
    *,
    positions: Mapping[str, float] | None = None,
    clip: float = DEFAULT_CLIP,
    missing_penalty: float = DEFAULT_MISSING_PENALTY,
    name: str = "market_reward",
) -> Callable[..., list[float | None]]:
    """A TRL market reward; `positions` maps each label to a position (e.g. long-only: SELL -> 0)."""
    table = dict(DEFAULT_POSITIONS if positions is None else positions)
    unknown = set(table) - set(LABELS)
    if unknown or set(LABELS) - set(table):
        raise ValueError(f"positions: keys must be exactly {list(LABELS)}, got {sorted(table)}")
    if not (clip > 0 and math.isfinite(clip)):
        raise ValueError(f"clip: must be a positive finite number, got {clip!r}")
    if not -clip <= missing_penalty <= clip:
        raise ValueError(f"missing_penalty: must lie in [-clip, clip], got {missing_penalty!r}")

    def reward(
        prompts: Sequence[Any] | None = None, completions: Sequence[Any] | None = None, **kwargs: Any
    ) -> list[float | None]:
        def score(i: int, completion: Any) -> float | None:
            thesis = parsed(completion)
            decision = thesis.decision
            # given the evidence column, the decision of an instruction the thesis quotes as evidence is
            # not its own (as in decision_reward and the combined recipes): it scores as missing
            if decision is not None and kwargs.get("evidence") is not None and obeys_instruction(
                    thesis, evidence_index(column(kwargs, "evidence", i))):
                decision = None
            return market_value(
                decision,
                column(kwargs, "fwd_return", i),
                column(kwargs, "fwd_vol", i),
                positions=table,
                clip=clip,
                missing_penalty=missing_penalty,
            )

        out = per_completion(completions, score, minimum=-clip, lo=-clip, hi=clip, name=name, kwargs=kwargs)
        log_metric(kwargs, "market/clipped", [float(abs(v) >= clip) for v in out if v is not None])
        return out

    reward.__name__ = name
    reward.__qualname__ = name
    return reward


market_reward = make_market_reward()
market_reward.__doc__ = (
    "Trade-R1 r = clip(position * fwd_return / fwd_vol, -3, 3); -1 without a decision; None without a return."
)
