"""thesisgym: train and verify LLM trading analysts with verifiable rewards."""

from thesisgym.schema import LABELS, SECTIONS, EvidenceItem

__version__ = "0.1.0"

__all__ = ["LABELS", "SECTIONS", "EvidenceItem", "__version__"]
