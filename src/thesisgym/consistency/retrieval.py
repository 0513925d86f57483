"""Stage 1 of the Trade-R1 verifier: split a thesis into claims and retrieve their evidence.

Trade-R1 turns "is this reasoning faithful to a long financial context?" into a RAG problem: first
retrieve, for each claim of the reasoning and for the decision, the few passages of the prompt that
bear on it, then let a judge look only at that compressed context. This module is the first half:

- `split_claims(completion)` -> `ThesisClaims`: bullets (via `thesisgym.thesis.parse_thesis`, the one
  thesis parser) become claims, up to `rewards.evidence.SATURATION` per section (where the reward
  for more bullets saturates: the judge reads the first ones, so padding a section cannot move s);
  every statement outside the bullets (section prose, the conclusion, text outside the blocks) is
  one more claim; the decision is kept apart.
- Evidence items are cut into passages (sentences and lines, then windows of `chunk_words` words), so a
  long filing or article contributes only the sentences a claim is about.
- `BM25Retriever` (default; the `bm25s` package computes the BM25 weights, we keep them as a dense
  token x passage matrix so all the claims of all the completions of one prompt are scored with one
  matrix product) and `EmbeddingRetriever` (sentence-transformers, any model id or local path, or any
  `encode(list[str]) -> array` callable). Indexing is the cost, so each
  distinct evidence list is indexed once and kept in an LRU cache: the `num_generations` completions
  of one prompt in a GRPO batch share it.
- `select_context(...)` builds the judge context: for every claim its cited passages (always included)
  and its top-k retrieved ones, plus the passages most relevant to the decision, merged round-robin
  (every claim gets its best passage before any claim gets a second) under a token budget.

Token counts (`count_tokens`) are a tokenizer-free estimate (words and punctuation marks) used the same
way on both sides of the compression ratio.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import repeat
from typing import Any, NamedTuple, Protocol

import numpy as np

from thesisgym.rewards.base import EvidenceIndex, evidence_index, parsed
from thesisgym.rewards.evidence import SATURATION
from thesisgym.thesis import Thesis, normalize_text, parse_bullet

_TOKEN_RE = re.compile(r"[a-z]+|\d+(?:\.\d+)?")
_COUNT_RE = re.compile(r"\w+|[^\w\s]")
_STOPWORDS = frozenset([
    "a", "an", "and", "are", "as", "at", "be", "been", "but", "by", "for", "from", "has", "have", "in", "into",
    "is", "it", "its", "of", "on", "or", "that", "the", "their", "this", "to", "was", "were", "will", "with",
    "which", "who", "than", "then", "there", "these", "those", "our", "we", "they", "he", "she", "you", "i",
    "not", "no",
])


@lru_cache(maxsize=1 << 16)
def _norm(text: str) -> str:
    return normalize_text(text)


def tokenize(text: str) -> list[str]:
    """Lower-cased words and numbers without stopwords: the unit BM25 sees."""
    return [t for t in _TOKEN_RE.findall(text.lower()) if t not in _STOPWORDS]


@lru_cache(maxsize=4096)
def count_tokens(text: str) -> int:
    """Tokenizer-free token estimate (words + punctuation marks). Memoised: a prompt is counted once
    for its whole GRPO group."""
    return len(_COUNT_RE.findall(text))


# --- claims ---------------------------------------------------------------------------------------
class Claim(NamedTuple):
    """One unit of reasoning: a bullet ("bullet"), or a statement outside the bullets ("conclusion",
    "prose" before a section's first bullet, "outside" every block). `ref` is the bullet's index in
    `Thesis.bullets` (for a statement: its index among them). A NamedTuple because a GRPO batch
    creates tens of thousands of them."""

    text: str
    opinion: str
    quotes: tuple[str, ...] = ()
    citations: tuple[str, ...] = ()
    numbers: tuple[tuple[float, int], ...] = ()
    section: str = ""
    kind: str = "bullet"
    ref: int = -1


@dataclass(frozen=True)
class ThesisClaims:
    claims: tuple[Claim, ...]
    decision: str | None
    conclusion: str | None = None
    thesis: Thesis | None = None  # the parsed completion the claims come from


def _statement(text: str, section: str, kind: str, ref: int) -> Claim:
    b = parse_bullet(text)
    return Claim(text=b.text, opinion=b.opinion, quotes=b.quotes, citations=b.citations, numbers=b.numbers,
                 section=section, kind=kind, ref=ref)


def split_claims(completion: Any) -> ThesisClaims:
    """Claims and decision of a completion (str or TRL conversational list); never raises."""
    thesis = parsed(completion)
    claims: list[Claim] = []
    ref = 0
    for s in thesis.sections:
        for k, b in enumerate(s.bullets):
            if k < SATURATION:
                claims.append(Claim(text=b.text, opinion=b.opinion, quotes=b.quotes, citations=b.citations,
                                    numbers=b.numbers, section=s.name, kind="bullet", ref=ref))
            ref += 1
    statements = [(s.prose, s.name, "prose") for s in thesis.sections if s.prose]
    if thesis.conclusion:
        statements.append((thesis.conclusion, "conclusion", "conclusion"))
    if thesis.outside:
        statements.append((thesis.outside, "outside", "outside"))
    claims += [_statement(text, section, kind, k) for k, (text, section, kind) in enumerate(statements)]
    return ThesisClaims(claims=tuple(claims), decision=thesis.decision, conclusion=thesis.conclusion, thesis=thesis)


# --- passages and the per-evidence-list index ------------------------------------------------------
@dataclass(frozen=True)
class Passage:
    """A piece of one evidence item; `item` is its index in the evidence list."""

    item: int
    item_id: str
    text: str
    tokens: int


_SENTENCE_RE = re.compile(r"(?<=[.;!?])\s+|\n+")


def chunk_item(text: str, *, chunk_words: int) -> list[str]:
    """Sentences (and lines) of an item, long ones cut into windows of `chunk_words` words."""
    out: list[str] = []
    for sentence in _SENTENCE_RE.split(str(text)):
        words = sentence.split()
        for i in range(0, len(words), chunk_words):
            out.append(" ".join(words[i : i + chunk_words]))
    return out or [""]


def render_item_header(item: dict) -> str:
    return f"[{item.get('id', '?')}] {item.get('date', '')} | {item.get('source', '')} |"


def render_evidence(evidence: Sequence[dict]) -> str:
    """The full evidence context as a prompt shows it (the compression baseline when no prompt is given)."""
    return "\n".join(f"{render_item_header(it)} {it.get('text', '')}" for it in evidence)


def render_passage(item_id: str, text: str) -> str:
    """A passage as the judge sees it: the id (needed to match citations) and the text, no header."""
    return f"[{item_id}] {text}"


@dataclass
class PassageIndex:
    """Everything derived from one evidence list, computed once and cached by the retriever.

    `grounding` is the rewards' `EvidenceIndex` of the same list (`rewards.base.evidence_index`,
    the same cached object the evidence reward uses): the judge verifies quotes, numbers and copied
    opinions with it, through the evidence reward's own checks (one grounding checker).
    """

    evidence: list[dict]
    passages: list[Passage]
    item_passages: list[list[int]]  # item index -> its passage indices
    id_to_item: dict[str, int]
    grounding: EvidenceIndex
    full_tokens: int  # tokens of the whole rendered evidence context
    backend: Any = None  # retriever-specific scoring state
    features: dict[str, Any] = field(default_factory=dict)  # judge caches (passage stances, ...)


def evidence_key(evidence: Sequence[dict]) -> tuple:
    """Content key of an evidence list: (id, text) pairs. Cheap to build and hash (C loops), and exact:
    the cache compares keys by equality, so two contexts never share an index by accident."""
    return tuple((str(it.get("id", "")), str(it.get("text", ""))) if isinstance(it, dict) else (repr(it), "")
                 for it in evidence)


def _base_index(evidence: Sequence[dict], *, chunk_words: int) -> PassageIndex:
    items: list[dict] = []
    for i, it in enumerate(evidence):
        if not isinstance(it, dict) or "id" not in it or "text" not in it:
            raise ValueError(f"evidence[{i}]: expected an EvidenceItem dict with 'id' and 'text', got {it!r:.80}")
        items.append(it)
    passages: list[Passage] = []
    item_passages: list[list[int]] = []
    for i, it in enumerate(items):
        idxs = []
        for chunk in chunk_item(it["text"], chunk_words=chunk_words):
            idxs.append(len(passages))
            passages.append(Passage(item=i, item_id=str(it["id"]), text=chunk, tokens=count_tokens(chunk)))
        item_passages.append(idxs)
    return PassageIndex(
        evidence=items,
        passages=passages,
        item_passages=item_passages,
        id_to_item={str(it["id"]).upper(): i for i, it in enumerate(items)},
        grounding=evidence_index(items),
        full_tokens=count_tokens(render_evidence(items)),
    )


class Retriever(Protocol):
    name: str

    def index(self, evidence: Sequence[dict]) -> PassageIndex: ...

    def scores(self, index: PassageIndex, queries: Sequence[str]) -> np.ndarray: ...


class _CachedRetriever:
    """LRU cache of PassageIndex objects keyed by the evidence content."""

    name = "base"

    def __init__(self, *, chunk_words: int = 24, cache_size: int = 512) -> None:
        if chunk_words < 1:
            raise ValueError(f"chunk_words must be >= 1, got {chunk_words}")
        self.chunk_words = chunk_words
        self.cache_size = cache_size
        self._cache: OrderedDict[tuple, PassageIndex] = OrderedDict()

    def index(self, evidence: Sequence[dict]) -> PassageIndex:
        key = evidence_key(evidence)
        hit = self._cache.get(key)
        if hit is not None:
            self._cache.move_to_end(key)
            return hit
        idx = _base_index(evidence, chunk_words=self.chunk_words)
        idx.backend = self._build(idx)
        self._cache[key] = idx
        if len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)
        return idx

    def _build(self, index: PassageIndex) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError


class BM25Retriever(_CachedRetriever):
    """BM25 (Lucene variant, via `bm25s`) over the passages of one evidence list."""

    name = "bm25"

    def __init__(self, *, k1: float = 1.5, b: float = 0.75, chunk_words: int = 24, cache_size: int = 512) -> None:
        super().__init__(chunk_words=chunk_words, cache_size=cache_size)
        self.k1, self.b = k1, b

    def _build(self, index: PassageIndex) -> tuple[dict[str, int], np.ndarray]:
        if not index.passages:
            return {}, np.zeros((1, 0), dtype=np.float32)
        import bm25s

        corpus = [tokenize(p.text) or ["\x00"] for p in index.passages]
        bm = bm25s.BM25(k1=self.k1, b=self.b)
        bm.index(corpus, show_progress=False)
        vocab: dict[str, int] = dict(bm.vocab_dict)
        s = bm.scores
        # bm25s keeps a CSC-like (token -> passages) sparse matrix; densify: evidence lists are small.
        dense = np.zeros((len(vocab) + 1, len(corpus)), dtype=np.float32)  # last row: unknown tokens
        indptr, indices, data = s["indptr"], s["indices"], s["data"]
        rows = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))
        dense[rows, indices] = data
        return vocab, dense

    def scores(self, index: PassageIndex, queries: Sequence[str]) -> np.ndarray:
        vocab, dense = index.backend
        unk = dense.shape[0] - 1  # all-zero row: stopwords and words absent from this evidence
        ids: list[int] = []
        starts: list[int] = []
        for q in queries:
            starts.append(len(ids))
            toks = _TOKEN_RE.findall(q.lower())
            ids += map(vocab.get, toks, repeat(unk, len(toks)))
            ids.append(unk)  # every query owns >= 1 row, so reduceat never sees an empty segment
        if not queries:
            return np.zeros((0, dense.shape[1]), dtype=np.float32)
        # BM25 of a query = sum of its tokens' rows (repeats count, as in bm25s). A gather + segmented
        # sum, not a matmul: BLAS threads spin badly on these tiny products on a busy machine.
        return np.add.reduceat(dense[np.asarray(ids, dtype=np.intp)], np.asarray(starts, dtype=np.intp), axis=0)


class EmbeddingRetriever(_CachedRetriever):
    """Cosine similarity of sentence embeddings (sentence-transformers model id/path, or any encoder).

    `encoder(texts) -> array (n, dim)` lets tests and custom stacks plug in without the package; with
    `model=...` the `sentence_transformers` package is imported lazily (pip install thesisgym[embeddings]).
    """

    name = "embedding"

    def __init__(
        self,
        *,
        model: str | None = None,
        encoder: Callable[[list[str]], np.ndarray] | None = None,
        device: str | None = None,
        chunk_words: int = 24,
        cache_size: int = 512,
    ) -> None:
        super().__init__(chunk_words=chunk_words, cache_size=cache_size)
        if (model is None) == (encoder is None):
            raise ValueError("EmbeddingRetriever: give exactly one of model= (id or local path) or encoder=")
        if encoder is None:
            try:
                from sentence_transformers import SentenceTransformer
            except ImportError as exc:
                raise ImportError(
                    "retriever='embedding' needs sentence-transformers: pip install 'thesisgym[embeddings]'"
                ) from exc
            st = SentenceTransformer(model, device=device)
            encoder = lambda texts: st.encode(texts, convert_to_numpy=True, show_progress_bar=False)  # noqa: E731
        self.encoder = encoder

    def _encode(self, texts: list[str]) -> np.ndarray:
        vecs = np.asarray(self.encoder(texts), dtype=np.float32)
        if vecs.ndim != 2 or vecs.shape[0] != len(texts):
            raise ValueError(f"encoder returned shape {vecs.shape} for {len(texts)} texts; expected (n, dim)")
        return vecs / np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-9)

    def _build(self, index: PassageIndex) -> np.ndarray:
        if not index.passages:
            return np.zeros((0, 1), dtype=np.float32)
        return self._encode([p.text for p in index.passages])

    def scores(self, index: PassageIndex, queries: Sequence[str]) -> np.ndarray:
        if not queries:
            return np.zeros((0, len(index.passages)), dtype=np.float32)
        return np.clip(self._encode(list(queries)) @ index.backend.T, 0.0, None)


def make_retriever(kind: str | Retriever = "bm25", **options: Any) -> Retriever:
    if not isinstance(kind, str):
        return kind
    if kind == "bm25":
        return BM25Retriever(**options)
    if kind == "embedding":
        return EmbeddingRetriever(**options)
    raise ValueError(f"unknown retriever {kind!r}; expected 'bm25' or 'embedding'")


# --- stage 1: per-claim retrieval and the judge context ---------------------------------------------
# Words that make a passage relevant to *a decision* whatever its direction: the decision query.
DECISION_QUERY = (
    "beats misses estimates guidance raises cuts upgrade downgrade surges plunges rally slump insider "
    "buying selling growth decline record loss surprise outperform underperform"
)


@dataclass
class JudgeContext:
    """What the judges see.

    claim_passages: per claim, its cited passages then its top-k retrieved ones, as (passage, score);
                    the local judge checks each claim against these only
    decision_passages: the passages retrieved for the decision
    selected:       the compressed context (unique passages, decision passages first, then claims
                    round-robin) under the token budget: what the LLM judge reads (the local
                    judge reads the evidence side of the evidence<->decision edge from every
                    passage of the context)
    """

    index: PassageIndex
    claim_passages: list[list[tuple[int, float]]]
    decision_passages: list[tuple[int, float]]
    selected: list[int]
    tokens: int  # tokens of the rendered compressed context
    dropped: int  # candidate passages left out by the budget

    @property
    def compression(self) -> float:
        return self.index.full_tokens / max(self.tokens, 1)

    def render(self) -> str:
        return "\n".join(render_passage(self.index.passages[p].item_id, self.index.passages[p].text)
                         for p in self.selected)


def context_queries(claims: Sequence[Claim], decision_text: str = "") -> list[str]:
    """The retrieval queries of a thesis: one per claim, then one for the decision."""
    return [c.text for c in claims] + [f"{decision_text} {DECISION_QUERY}"]


def _cited_passage(index: PassageIndex, item: int, claim: Claim, row_scores: Sequence[float]) -> int:
    """The passage of a cited item that holds the claim's quote, else its best-scoring passage."""
    cands = index.item_passages[item]
    if len(cands) == 1:
        return cands[0]
    for q in claim.quotes:
        nq = _norm(q)
        for p in cands:
            if nq and nq in _norm(index.passages[p].text):
                return p
    return max(cands, key=lambda p: row_scores[p])


def select_context(
    index: PassageIndex,
    claims: Sequence[Claim],
    retriever: Retriever,
    *,
    top_k: int = 1,
    decision_k: int = 4,
    decision_text: str = "",
    max_context_tokens: int | None = 256,
    scores: np.ndarray | None = None,
) -> JudgeContext:
    """Per-claim cited + top-k passages and the decision's top passages, merged under a token budget.

    `scores` (rows = `context_queries(claims, decision_text)`) may be passed in when the caller scored
    several theses of one prompt in one retriever call."""
    queries = context_queries(claims, decision_text)
    n_pass = len(index.passages)
    if scores is None:
        scores = retriever.scores(index, queries) if n_pass else np.zeros((len(queries), 0), dtype=np.float32)
    # One vectorised sort for all claims; the per-claim loop then works on Python lists (n is small).
    max_cites = max([len(c.citations) for c in claims] + [0])
    width = min(top_k + max_cites, n_pass)
    order = np.argsort(-scores, axis=1, kind="stable")[:, :max(width, decision_k)].tolist() if n_pass else [[]] * len(queries)
    srows = scores.tolist()
    per_claim: list[list[tuple[int, float]]] = []
    for ci, claim in enumerate(claims):
        row = srows[ci]
        chosen: list[int] = []
        # a bullet's cited passages always reach the judge; a statement outside the bullets selects
        # no evidence by citing it (its citations are graded, never followed)
        for cid in claim.citations if claim.kind == "bullet" else ():
            item = index.id_to_item.get(cid)
            if item is not None:
                p = _cited_passage(index, item, claim, row)
                if p not in chosen:
                    chosen.append(p)
        extra = 0
        for p in order[ci]:
            if extra >= top_k or row[p] <= 0:
                break
            if p not in chosen:
                chosen.append(p)
                extra += 1
        per_claim.append([(p, row[p]) for p in chosen])
    dsel: list[tuple[int, float]] = []
    if decision_k > 0 and n_pass:
        drow = srows[-1]
        dsel = [(p, drow[p]) for p in order[-1][:decision_k] if drow[p] > 0]

    # Decision passages first (the evidence<->decision edge must not depend on what the thesis chose
    # to cite), then rank r of every claim before rank r+1 of any.
    ordered: list[int] = []
    seen: set[int] = set()
    for p, _ in dsel:
        if p not in seen:
            seen.add(p)
            ordered.append(p)
    depth = max([len(c) for c in per_claim] + [0])
    for r in range(depth):
        for cp in per_claim:
            if r < len(cp) and cp[r][0] not in seen:
                seen.add(cp[r][0])
                ordered.append(cp[r][0])
    selected: list[int] = []
    used = 0
    for p in ordered:
        psg = index.passages[p]
        cost = psg.tokens + 3  # "[id]" + newline
        if max_context_tokens is not None and used + cost > max_context_tokens and selected:
            continue  # a later, shorter passage may still fit
        selected.append(p)
        used += cost
    return JudgeContext(
        index=index, claim_passages=per_claim, decision_passages=dsel, selected=selected,
        tokens=used, dropped=len(ordered) - len(selected),
    )
