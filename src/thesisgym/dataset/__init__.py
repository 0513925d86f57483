"""Point-in-time contexts: evidence items with ids, rendered prompts, variations, token budgets; and the
audit that re-dates every item of built prompts from the store (`audit_prompts`)."""

from thesisgym.dataset.contexts import ContextConfig, build_contexts, context_schema
from thesisgym.dataset.indicators import compute_indicators
from thesisgym.dataset.leakage import AuditReport, audit_prompts
from thesisgym.dataset.render import count_tokens, render_context

__all__ = [
    "AuditReport",
    "ContextConfig",
    "audit_prompts",
    "build_contexts",
    "compute_indicators",
    "context_schema",
    "count_tokens",
    "render_context",
]
