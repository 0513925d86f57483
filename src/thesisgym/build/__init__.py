"""Point-in-time contexts: evidence items with ids, rendered prompts, variations, token budgets."""

from thesisgym.build.contexts import ContextConfig, build_contexts, context_schema
from thesisgym.build.indicators import compute_indicators
from thesisgym.build.render import count_tokens, render_context

__all__ = [
    "ContextConfig",
    "build_contexts",
    "compute_indicators",
    "context_schema",
    "count_tokens",
    "render_context",
]
