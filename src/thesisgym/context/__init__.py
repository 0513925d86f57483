"""Point-in-time contexts: evidence items with ids, rendered prompts, variations, token budgets."""

from thesisgym.context.build import ContextConfig, build_contexts, context_schema
from thesisgym.context.indicators import compute_indicators
from thesisgym.context.render import count_tokens, render_context

__all__ = [
    "ContextConfig",
    "build_contexts",
    "compute_indicators",
    "context_schema",
    "count_tokens",
    "render_context",
]
