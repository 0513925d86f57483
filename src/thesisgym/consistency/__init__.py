"""Trade-R1 consistency verifier: two-stage retrieval + triangular judges -> s in [0, 1].

    from thesisgym.consistency import make_consistency_reward
    s_reward = make_consistency_reward(judge="local", retriever="bm25")   # a TRL reward callable
    s_reward(prompts, completions, evidence=rows_evidence)                # -> [s, ...]

Stage 1 (`retrieval`) splits a thesis into claims and retrieves their evidence passages into a
compressed judge context; stage 2 (`judges`) scores factuality, deduction and consistency; the
`verifier` combines them (mean | min | geometric) and wraps everything as a TRL reward.
"""

from thesisgym.consistency.judges import (
    LEXICON,
    JudgeAnswer,
    LLMJudge,
    LocalJudge,
    Verdict,
    judge_messages,
    make_judge,
    stance,
)
from thesisgym.consistency.retrieval import (
    BM25Retriever,
    Claim,
    EmbeddingRetriever,
    JudgeContext,
    ThesisClaims,
    count_tokens,
    make_retriever,
    select_context,
    split_claims,
)
from thesisgym.consistency.verifier import (
    COMBINES,
    ConsistencyResult,
    ConsistencyVerifier,
    combine_scores,
    make_consistency_reward,
)

__all__ = [
    "COMBINES", "LEXICON", "BM25Retriever", "Claim", "ConsistencyResult", "ConsistencyVerifier",
    "EmbeddingRetriever", "JudgeAnswer", "JudgeContext", "LLMJudge", "LocalJudge", "ThesisClaims", "Verdict",
    "combine_scores", "count_tokens", "judge_messages", "make_consistency_reward", "make_judge",
    "make_retriever", "select_context", "split_claims", "stance",
]
