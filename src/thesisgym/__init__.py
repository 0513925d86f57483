"""thesisgym: train and verify LLM trading analysts with verifiable rewards.

The packages are the pipeline, in order; each imports only the ones before it (tests/test_layout.py):

- `schema`, `thesis`, `llm`: the shared vocabulary (labels, sections, evidence items), the one parser of
  the thesis format, and the OpenAI-compatible client every judge, teacher and remote policy uses;
- `data`: sources -> the point-in-time `MarketStore`;
- `build`: contexts (evidence with ids, rendered prompts), labels and embargoed dataset splits;
- `rewards`, `consistency`: the verifier (structure, evidence, decision, market, loops, combiners) and
  the Trade-R1 consistency judge s;
- `teachers`: template and LLM teachers, and distillation by rejection sampling;
- `train`: models, SFT and GRPO through TRL;
- `evaluate`: policies, backtests, statistics, probes, the report, and the audit of the rewards;
- `experiments`: the demo and the paper reproductions, end to end;
- `integrations`: verl, verifiers, OpenRLHF, exports and the HTTP reward service;
- `cli`: the `thesisgym` command on top.
"""

from thesisgym.schema import LABELS, SECTIONS, EvidenceItem

__version__ = "0.1.0"

__all__ = ["LABELS", "SECTIONS", "EvidenceItem", "__version__"]
