"""Point-in-time tools for analyst agents: market lookups cut at the as-of time by construction.

- `MarketTools` (tools.market): the tools of one episode over `store.as_of(day)`, with the evidence
  ledger the verifier checks quotes against;
- `MarketToolEnv`, `tool_env_factory`, `with_tool_evidence`, `tool_usage_reward` (tools.env): the TRL
  GRPOTrainer environment and the rewards that verify against a rollout's own tool results;
- `audit_tool` (tools.lookahead): call any tool function at a set of cutoffs and flag look-ahead.
"""

from thesisgym.tools.env import MarketToolEnv, tool_env_factory, tool_usage_reward, with_tool_evidence
from thesisgym.tools.lookahead import ToolAudit, audit_tool
from thesisgym.tools.market import TOOL_NAMES, MarketTools, ToolError, ToolLimits, ToolUsage

__all__ = [
    "TOOL_NAMES",
    "MarketToolEnv",
    "MarketTools",
    "ToolAudit",
    "ToolError",
    "ToolLimits",
    "ToolUsage",
    "audit_tool",
    "tool_env_factory",
    "tool_usage_reward",
    "with_tool_evidence",
]
