"""Stage 2 of the Trade-R1 verifier: triangular judges over the compressed context.

A judge returns three alignments in [0, 1] (Trade-R1's triangular consistency metric):
factuality  (evidence <-> reasoning), deduction (reasoning <-> decision), consistency
(evidence <-> decision). Two judges:

`LocalJudge` (default: deterministic, offline, ~1.5 ms per thesis with retrieval). Per claim i (bullet or conclusion):
- the claim is judged against its own retrieved passages only (its cited ones + top-k), never the
  whole prompt;
- grounding g_i = mean of the checks that apply, each asked of the evidence reward's own checker
  (`rewards.evidence` on the rewards' `EvidenceIndex` of the same evidence list, `PassageIndex.grounding`:
  one grounding checker): cited ids exist in the prompt; each quote is a credited span of a cited
  item (1), a true span not credited there (uninformative, a number cut from its unit) or a span of
  another retrieved item (0.5), or none (0); the quantities of the opinion match those of its cited
  items (else of its retrieved ones) with direction, unit and scale. A claim with none of these checks
  gets 1 if retrieval found any passage, else 0.25. Then g_i is multiplied by the opinion's fact
  support: the share of the facts it states (FACT_TERMS: actors, corporate events, business figures)
  found in its cited items (else its retrieved passages), so "the chief executive resigned" over an
  item that says nothing of it does not count as agreeing with that item.
- stance c_i in [-1, 1] of the opinion (quotes removed; if the opinion carries no signal the author is
  taken to adopt the quote's), and stance e_i of its evidence (cited passages, else the retrieved ones
  weighted by score), both from `stance()` below; passages also get the direction of the technical
  levels they state (`level_score`: a moving average against the latest close, RSI, MACD histogram).
- f_i = g_i * (1 - |c_i - e_i| / 2): a grounded claim that reads the evidence backwards scores ~0.
Then factuality F = mean f_i; deduction D = F * (1 - |R - P| / 2) where R is the f-weighted mean claim
stance and P the decision's position (schema.DEFAULT_POSITIONS): only grounded reasoning can support a
decision, so a fluent story built on misread evidence earns no deduction credit (this is what ranks
"claims contradict the evidence" below "decision contradicts the claims"); consistency C = 1 - |E - P|/2
with E the net-to-gross stance of every passage of the context (sum e / sum |e|, 0 if no passage has
a stance), so a thesis cannot choose the evidence its decision is compared with by citing only what
suits it, and E does not hang on the few passages a keyword query happens to retrieve.
No valid decision -> D = C = 0; no claims -> F = D = 0.

Stance (`stance(text)`): a documented finance lexicon (`LEXICON`: beats/misses, upgrade/downgrade,
raises/cuts guidance, surges/plunges, insider buying/selling, bullish/bearish, ...; multi-word phrases
first), flipped by a negation within the three preceding words ("did not beat", "no upgrade", "fails to
beat"), plus explicitly signed percentages ("+3.1%" / "-2.4%"). Score = tanh(sum of weights).

`LLMJudge`: one prompt per thesis with the compressed context, the claims and the decision; the answer
must be JSON {"factuality", "deduction", "consistency", "rationale"} (validated with pydantic, values
in [0, 1]); the whole batch runs concurrently through `thesisgym.llm.LLMClient`. FALLBACK: when the
request fails for good or the answer is still malformed after a retry, the verdict is the local
judge's for that thesis (fallback="local", default) or all three scores = a constant
(fallback=0.5 ...); `source` says which, and the client counts `json_fallbacks`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from pydantic import BaseModel, Field

from thesisgym.consistency.retrieval import Claim, JudgeContext, ThesisClaims
from thesisgym.rewards.evidence import (
    opinion_copied_share,
    quantity_backed,
    quote_credited,
    quote_found,
    quote_too_short,
)
from thesisgym.schema import DEFAULT_POSITIONS
from thesisgym.thesis import scan_quantities

# --- the finance lexicon ----------------------------------------------------------------------------
# word or phrase -> weight (positive = bullish). Phrases are matched before single words.
LEXICON: dict[str, float] = {
    # earnings / guidance
    "beat": 1.0, "beats": 1.0, "beating": 1.0, "exceeded": 1.0, "exceeds": 1.0, "exceed": 1.0, "tops": 1.0,
    "topped": 1.0, "miss": -1.0, "misses": -1.0, "missed": -1.0, "shortfall": -1.0, "fell short": -1.0,
    "raises guidance": 1.5, "raised guidance": 1.5, "raises outlook": 1.5, "cuts guidance": -1.5,
    "cut guidance": -1.5, "lowers guidance": -1.5, "lowered guidance": -1.5, "profit warning": -1.5,
    "raises": 0.75, "raised": 0.75, "raise": 0.5, "cuts": -0.75, "cut": -0.5, "lowers": -0.75, "lowered": -0.75,
    "record": 0.75, "loss": -0.75, "losses": -0.75, "warning": -0.75, "warns": -1.0,
    # analysts
    "upgrade": 1.0, "upgrades": 1.0, "upgraded": 1.0, "downgrade": -1.0, "downgrades": -1.0, "downgraded": -1.0,
    "outperform": 1.0, "overweight": 1.0, "underperform": -1.0, "underweight": -1.0,
    "price target raised": 1.0, "price target cut": -1.0,
    # price action
    "surge": 1.0, "surges": 1.0, "surged": 1.0, "soar": 1.0, "soars": 1.0, "soared": 1.0, "jumps": 1.0,
    "jumped": 1.0, "rally": 1.0, "rallies": 1.0, "rallied": 1.0, "gains": 0.75, "gained": 0.75, "rises": 0.75,
    "rose": 0.75, "climbs": 0.75, "climbed": 0.75, "plunge": -1.0, "plunges": -1.0, "plunged": -1.0,
    "tumbles": -1.0, "tumbled": -1.0, "slump": -1.0, "slumps": -1.0, "slumped": -1.0, "sinks": -1.0,
    "sank": -1.0, "drops": -0.75, "dropped": -0.75, "falls": -0.75, "fell": -0.75, "declines": -0.75,
    "declined": -0.75, "decline": -0.75, "slides": -0.75, "slid": -0.75,
    "up": 0.4, "down": -0.4, "above": 0.5, "below": -0.5, "higher": 0.5, "lower": -0.5,
    "uptrend": 1.0, "downtrend": -1.0, "breakout": 0.75, "breakdown": -0.75, "momentum": 0.25,
    "overbought": -0.5, "oversold": 0.5,
    # insiders
    "insider buying": 1.25, "insider purchase": 1.25, "insider purchases": 1.25, "bought shares": 1.0,
    "insider selling": -1.25, "insider sale": -1.25, "insider sales": -1.25, "sold shares": -1.0,
    "buys": 0.5, "bought": 0.5, "purchase": 0.5, "purchases": 0.5, "sells": -0.5, "sold": -0.5, "sale": -0.5,
    # fundamentals / business
    "growth": 0.75, "grows": 0.75, "grew": 0.75, "expands": 0.75, "expansion": 0.5, "accelerates": 0.75,
    "improves": 0.75, "improved": 0.75, "improving": 0.75, "strong": 0.75, "stronger": 0.75, "robust": 0.75,
    "weak": -0.75, "weaker": -0.75, "weakness": -0.75, "shrinks": -0.75, "contraction": -0.5, "slowdown": -0.75,
    "deteriorating": -0.75, "deteriorates": -0.75, "margin expansion": 1.0, "margin pressure": -1.0,
    "lawsuit": -0.75, "probe": -0.75, "investigation": -0.75, "recall": -0.75, "fraud": -1.5, "default": -1.0,
    "bankruptcy": -1.5, "layoffs": -0.5, "wins": 0.75, "contract win": 1.0, "loses": -0.75, "lost": -0.5,
    "at risk": -0.75, "lifts": 0.75, "lifted": 0.75, "boosts": 0.75, "boosted": 0.75, "slashes": -1.0,
    "job cuts": -0.75, "writedown": -1.0, "impairment": -1.0, "buyback": 0.75, "dividend increase": 1.0,
    "dividend cut": -1.5, "beat expectations": 1.0, "missed expectations": -1.0,
    # the analyst's own verdict words
    "bullish": 1.0, "bearish": -1.0, "positive": 0.75, "negative": -0.75, "optimistic": 0.75,
    "pessimistic": -0.75, "upside": 0.75, "downside": -0.75, "tailwind": 0.75, "tailwinds": 0.75,
    "headwind": -0.75, "headwinds": -0.75, "favorable": 0.75, "unfavorable": -0.75, "supportive": 0.5,
    "concern": -0.5, "concerns": -0.5, "risk": -0.25, "risks": -0.25, "attractive": 0.75, "undervalued": 0.75,
    "overvalued": -0.75, "buy": 0.5, "sell": -0.5, "accumulate": 0.75, "avoid": -0.75, "short": -0.5,
    "rebound": 0.75, "recovery": 0.75, "deterioration": -0.75, "outflows": -0.5, "inflows": 0.5,
    "constructive": 0.75, "encouraging": 0.75, "worrying": -0.75, "caution": -0.5, "cautious": -0.5,
    "long position": 0.75, "short position": -0.75,
}
NEGATIONS = frozenset(
    ["not", "no", "never", "without", "nor", "fails", "fail", "failed", "neither", "isn't", "wasn't", "didn't", "doesn't", "don't", "won't", "cannot", "hardly", "barely", "lacks", "lack"]
)
_PHRASES = sorted((k for k in LEXICON if " " in k), key=len, reverse=True)
_PHRASE_RE = re.compile(r"\b(" + "|".join(re.escape(p) for p in _PHRASES) + r")\b")
_WORD_RE = re.compile(r"[a-z][a-z'_]*")
_SIGNED_PCT_RE = re.compile(r"(?<![\w.])([+\-\u2212])\s?\d+(?:\.\d+)?\s?%")
_SIGNED_PCT_WEIGHT = 0.75
# "record" is bullish as an adjective ("record orders", "a record high"); followed by one of these (or
# nothing) it is the noun ("the record shows", "part of the record for the period") and reads nothing
_NOT_AFTER_RECORD = frozenset(
    ["shows", "show", "showed", "says", "said", "is", "was", "for", "of", "and", "or", "in", "on", "at", "to",
     "as", "with", "from", "by", "that", "this", "which", "the", "a", "an", "it", "so", "but"]
)
# --- technical levels ---------------------------------------------------------------------------------
# An indicator line states a level, not a direction ("SMA(50) 156.90", "RSI(14) 66.0"); its direction
# is read against the latest close of the context (the close of the latest-dated item that shows one,
# never "of close" as in "z-score(20) of close 0.80"), in lexicon units: price above/below a moving
# average +-0.75, RSI above 55 / below 45 +-0.5 (momentum reading), MACD histogram sign +-0.5.
_NUM = r"([+\-\u2212]?\d[\d,]*(?:\.\d+)?)"
_CLOSE_RE = re.compile(r"(?<!of )\bclose\s*[:=]?\s*" + _NUM, re.I)
# the period is no level: "SMA(50) 40.27", "SMA50 40.27", "RSI14 70"
_MA_RE = re.compile(r"\b(?:sma|ema)\d*\s*(?:\([\d,\s]+\))?\s*[:=]?\s*" + _NUM, re.I)
_RSI_RE = re.compile(r"\brsi\d*\s*(?:\([\d,\s]+\))?\s*[:=]?\s*" + _NUM, re.I)
_HIST_RE = re.compile(r"\bhistogram\s*[:=]?\s*" + _NUM, re.I)
MA_WEIGHT, RSI_WEIGHT, MACD_WEIGHT = 0.75, 0.5, 0.5


def _value(m: re.Match | None) -> float | None:
    if m is None:
        return None
    try:
        return float(m.group(1).replace("\u2212", "-").replace(",", ""))
    except ValueError:
        return None


def latest_close(evidence: Sequence[dict]) -> float | None:
    """The close of the latest-dated evidence item that shows one (ties: the first listed), or None."""
    best: tuple[str, float] | None = None
    for it in evidence:
        close = _value(_CLOSE_RE.search(str(it.get("text", ""))))
        if close is not None and close > 0:
            date = str(it.get("date", ""))
            if best is None or date > best[0]:
                best = (date, close)
    return best[1] if best else None


def level_score(text: str, close: float | None = None) -> float:
    """Direction of the technical levels in `text`, in lexicon units (see above); 0 without any.
    A line that shows its own close is read against it, else against `close`."""
    if not isinstance(text, str) or not text:
        return 0.0
    total = 0.0
    ma = _value(_MA_RE.search(text))
    if ma is not None:
        own = _value(_CLOSE_RE.search(text))
        ref = own if own is not None else close
        if ref is not None and ref != ma:
            total += MA_WEIGHT if ref > ma else -MA_WEIGHT
    rsi = _value(_RSI_RE.search(text))
    if rsi is not None and (rsi > 55 or rsi < 45):
        total += RSI_WEIGHT if rsi > 55 else -RSI_WEIGHT
    hist = _value(_HIST_RE.search(text))
    if hist:
        total += MACD_WEIGHT if hist > 0 else -MACD_WEIGHT
    return total


# --- facts ---------------------------------------------------------------------------------------------
# Words that state a fact about the company or its market (actors, corporate events, business
# figures). An opinion may judge its evidence in any words, but each fact it states must be found
# in that evidence: "the chief executive resigned", "record orders from a new customer" are facts,
# "reads as constructive for the stock" is a view. Matched by stem (`_stem`), so "approved" is
# backed by "approval". Generic price words (stock, shares, price) and the lexicon's readings
# (rises, falls, strong, ...) are not facts here.
FACT_TERMS = frozenset("""
ceo cfo coo cto chairman chairwoman chief executive executives founder president board directors
management manager regulator regulators regulatory sec ftc doj fda antitrust court judge jury lawsuit
lawsuits sued sues settlement settle fined penalty ban banned sanctions tariff tariffs subpoena
investigation probe recall merger acquisition acquire acquires acquired takeover buyout spinoff ipo
offering stake resign resigns resigned resignation appoint appoints appointed hires hired fired ousted
retire retires retired departure successor approve approves approved approval launch launches launched
unveil unveils unveiled announce announces announced contract contracts deal deals order orders
customer customers client clients supplier suppliers partner partners partnership alliance license
licence patent patents product products plant factory facility facilities store stores layoffs strike
outage breach hack cyberattack bankruptcy default dividend dividends buyback buybacks repurchase split
guidance forecast earnings revenue revenues sales profit profits eps shipments deliveries subscribers
users upgrade upgrades upgraded downgrade downgrades downgraded beat beats missed misses
""".split())  # noqa: SIM905 - a word list reads better as text
_FACT_WORD_RE = re.compile(r"[a-z]+")


@lru_cache(maxsize=1 << 16)
def _stem(word: str) -> str:
    """Crude stem: one plural/tense suffix off (keeping 4+ letters), then the first 6 letters."""
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 4:
            word = word[: -len(suffix)]
            break
    return word[:6]


@lru_cache(maxsize=1 << 16)
def fact_stems(text: str) -> frozenset[str]:
    """Stems of the FACT_TERMS that `text` states."""
    words = _FACT_WORD_RE.findall(text.lower()) if isinstance(text, str) else []
    return frozenset(st for st in map(_stem, (w for w in words if w in FACT_TERMS)))


@lru_cache(maxsize=1 << 16)
def _all_stems(text: str) -> frozenset[str]:
    return frozenset(map(_stem, _FACT_WORD_RE.findall(text.lower())))


# weight of one passage with a stance that no claim addresses, relative to one claim (F and R)
OMITTED_WEIGHT = 0.5


def stance_score(text: str) -> float:
    """Raw lexicon score of `text` (sum of weights with negation, plus signed percentages)."""
    if not isinstance(text, str):
        return 0.0
    low = text.lower()
    low = _PHRASE_RE.sub(lambda m: m.group(1).replace(" ", "_"), low)
    total = 0.0
    words = _WORD_RE.findall(low)
    for i, w in enumerate(words):
        weight = LEXICON.get(w.replace("_", " ")) if "_" in w else LEXICON.get(w)
        if weight is None:
            continue
        if w == "record" and (i + 1 == len(words) or words[i + 1] in _NOT_AFTER_RECORD):
            continue  # "the record shows", "part of the record for": the noun, not "record orders"
        if any(p in NEGATIONS for p in words[max(0, i - 3) : i]):
            weight = -weight
        total += weight
    for m in _SIGNED_PCT_RE.finditer(text):
        total += _SIGNED_PCT_WEIGHT if m.group(1) == "+" else -_SIGNED_PCT_WEIGHT
    return total


@lru_cache(maxsize=1 << 16)
def stance(text: str) -> float:
    """Stance of `text` in [-1, 1]: tanh of the lexicon score (0 = no signal). Memoised: evidence
    texts and template opinions repeat across a GRPO group."""
    return math.tanh(stance_score(text)) if isinstance(text, str) and text else 0.0


# --- verdicts -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Verdict:
    factuality: float
    deduction: float
    consistency: float
    rationale: str = ""
    source: str = "local"  # local | llm | fallback


class JudgeAnswer(BaseModel):
    """The JSON an LLM judge must return."""

    factuality: float = Field(ge=0.0, le=1.0)
    deduction: float = Field(ge=0.0, le=1.0)
    consistency: float = Field(ge=0.0, le=1.0)
    rationale: str = ""


class LocalJudge:
    """Deterministic triangular judge (see the module docstring for every formula)."""

    name = "local"

    def _passage_stances(self, ctx: JudgeContext) -> list[float]:
        feats = ctx.index.features
        st = feats.get("stance")
        if st is None:
            close = latest_close(ctx.index.evidence)
            st = [math.tanh(stance_score(p.text) + level_score(p.text, close)) if p.text else 0.0
                  for p in ctx.index.passages]
            feats["stance"] = st
        return st

    def judge(self, thesis: ThesisClaims, ctx: JudgeContext) -> Verdict:
        st = self._passage_stances(ctx)
        f_vals: list[float] = []
        c_vals: list[float] = []
        addressed: set[int] = set()
        for claim, cps in zip(thesis.claims, ctx.claim_passages, strict=True):
            # facts the opinion states that its evidence does not hold make it unsupported
            g = self._grounding(claim, cps, ctx) * self._fact_support(claim, cps, ctx)
            # an opinion that copies its evidence states no view of its own (same rule as the reward)
            copied = opinion_copied_share(claim.opinion, ctx.index.grounding) > 0.5
            c = 0.0 if copied else stance(claim.opinion)
            e = self._evidence_stance(claim, cps, ctx, st)
            # a stance-free opinion does not agree with evidence that has a stance
            f_vals.append(g * (1.0 - abs(e)) if abs(c) < 1e-6 else g * (1.0 - abs(c - e) / 2.0))
            c_vals.append(c)
            addressed.update(ctx.index.id_to_item[cid] for cid in claim.citations if cid in ctx.index.id_to_item)
        # evidence with a stance that no claim addresses counts against the reasoning: F averages
        # over it too (f = 0, weight OMITTED_WEIGHT), and R weighs its stance in, so leaving out the evidence that
        # disagrees with the decision (cherry-picking) cannot raise F or move R
        omitted = [st[p] for p, psg in enumerate(ctx.index.passages) if psg.item not in addressed and abs(st[p]) > 0.1]
        n_f = len(f_vals) + OMITTED_WEIGHT * len(omitted)
        F = sum(f_vals) / n_f if f_vals else 0.0
        position = DEFAULT_POSITIONS.get(thesis.decision or "", None)
        if position is None:
            return Verdict(F, 0.0, 0.0, "no valid decision")
        mean_f = sum(f_vals) / len(f_vals) if f_vals else 0.0
        w_o = OMITTED_WEIGHT * mean_f
        wsum = sum(f_vals) + w_o * len(omitted)
        R = (
            (sum(w * c for w, c in zip(f_vals, c_vals, strict=True)) + w_o * sum(omitted)) / wsum
            if wsum > 1e-9
            else 0.0
        )
        D = F * (1.0 - abs(R - position) / 2.0)
        # the evidence <-> decision edge reads every passage of the context that has a stance (either
        # direction): neither the passages the thesis cites nor its conclusion move it. Not only the
        # passages the direction-neutral decision query retrieves: that query's words (beats, guidance,
        # upgrade, ...) miss price moves and indicator lines, and 4 passages are a noisy sample
        # (bench_consistency.py, synthetic market A, 1,168 rows: Spearman of C with the true expected
        # return 0.22 on those passages, 0.79 on every passage)
        E = self._context_stance(ctx, st)
        C = 1.0 - abs(E - position) / 2.0
        return Verdict(F, D, C, f"claims={len(f_vals)} omitted={len(omitted)} R={R:+.2f} E={E:+.2f} P={position:+.2f}")

    @staticmethod
    def _fact_support(claim: Claim, cps: list[tuple[int, float]], ctx: JudgeContext) -> float:
        """Share of the facts stated by the opinion (FACT_TERMS, by stem) that its evidence holds:
        the bodies of its cited items, or, when it cites none, its retrieved passages. 1 when the
        opinion states no fact."""
        facts = fact_stems(claim.opinion)
        if not facts:
            return 1.0
        index = ctx.index
        items = [index.id_to_item[c] for c in claim.citations if c in index.id_to_item]
        texts = [str(index.evidence[i].get("text", "")) for i in items] or [index.passages[p].text for p, _ in cps]
        held: set[str] = set()
        for t in texts:
            held.update(_all_stems(t))
        return len(facts & held) / len(facts)

    @staticmethod
    def _context_stance(ctx: JudgeContext, st: list[float]) -> float:
        """Net-to-gross stance of the whole context (sum e / sum |e|, 0 without a stance), per index."""
        E = ctx.index.features.get("context_stance")
        if E is None:
            gross = sum(abs(x) for x in st)
            E = ctx.index.features["context_stance"] = sum(st) / gross if gross > 1e-9 else 0.0
        return E

    @staticmethod
    def _evidence_stance(claim: Claim, cps: list[tuple[int, float]], ctx: JudgeContext, st: list[float]) -> float:
        if not cps:
            return 0.0
        passages = ctx.index.passages
        if claim.citations:
            cited_items = {ctx.index.id_to_item.get(c) for c in claim.citations}
            cited = [st[p] for p, _ in cps if passages[p].item in cited_items]
            if cited:
                return sum(cited) / len(cited)
        wsum = sum(max(s, 0.0) for _, s in cps)
        if wsum > 0:
            return sum(max(s, 0.0) * st[p] for p, s in cps) / wsum
        return sum(st[p] for p, _ in cps) / len(cps)

    @staticmethod
    def _grounding(claim: Claim, cps: list[tuple[int, float]], ctx: JudgeContext) -> float:
        """g in [0, 1]: the mean of the checks that apply, each asked of the evidence reward's own
        checker (`rewards.evidence`: word-bounded spans, quantities with unit/scale/direction) on
        the same `EvidenceIndex`, over the items this claim's judge input holds."""
        index = ctx.index
        grounding = index.grounding
        checks: list[float] = []
        cited = [c for c in claim.citations if c in grounding.items]
        if claim.citations:
            checks.append(len(cited) / len(claim.citations))
        seen = {index.passages[p].item_id.strip().upper() for p, _ in cps}  # what this claim's judge input holds
        visible_cited = [c for c in cited if c in seen]
        others = [i for i in seen if i not in visible_cited]
        for q in claim.quotes:
            if quote_too_short(q):
                continue  # proves nothing (the reward's rule)
            if any(quote_credited(q, c, grounding) for c in visible_cited):
                checks.append(1.0)
            elif any(quote_found(q, i, grounding) for i in (*visible_cited, *others)):
                checks.append(0.5)  # true but not credited (uninformative, cut number) or not the cited item
            else:
                checks.append(0.0)
        if claim.numbers:
            pool = visible_cited or sorted(seen)
            quantities = scan_quantities(claim.opinion)
            if quantities:
                checks.append(sum(quantity_backed(x, pool, grounding) for x in quantities) / len(quantities))
        if not checks:
            checks.append(1.0 if cps else 0.25)
        return sum(checks) / len(checks)


# --- the LLM judge ----------------------------------------------------------------------------------
JUDGE_SYSTEM = """You verify equity research theses against their evidence. You are given EVIDENCE \
(the only facts you may use), the thesis CLAIMS and its DECISION. Score three alignments from 0 to 1:
- factuality: do the claims state what the evidence says (quotes, numbers, direction)?
- deduction: does the decision follow from the claims?
- consistency: does the decision agree with the evidence itself?
Answer with JSON only: {"factuality": x, "deduction": y, "consistency": z, "rationale": "one sentence"}"""


def judge_messages(thesis: ThesisClaims, ctx: JudgeContext) -> list[dict[str, str]]:
    """The chat messages an LLM judge receives: compressed evidence + claims + decision."""
    claims = "\n".join(f"- ({c.section}) {c.text}" for c in thesis.claims) or "(no claims)"
    user = (
        f"EVIDENCE:\n{ctx.render() or '(none retrieved)'}\n\nCLAIMS:\n{claims}\n\n"
        f"DECISION: {thesis.decision or '(missing or invalid)'}"
    )
    return [{"role": "system", "content": JUDGE_SYSTEM}, {"role": "user", "content": user}]


class LLMJudge:
    """Triangular judge backed by any OpenAI-compatible endpoint (see `thesisgym.llm.LLMClient`)."""

    name = "llm"

    def __init__(
        self,
        client: Any = None,
        *,
        fallback: str | float = "local",
        temperature: float = 0.0,
        max_tokens: int = 256,
        **client_options: Any,
    ) -> None:
        if client is None:
            from thesisgym.llm import LLMClient

            if "model" not in client_options:
                raise TypeError("judge='llm' needs model= (and usually base_url=) or client=LLMClient(...)")
            client = LLMClient(**client_options)
        elif client_options:
            raise TypeError(f"LLMJudge: pass either client= or client options, not both ({sorted(client_options)})")
        if not (fallback == "local" or isinstance(fallback, (int, float)) and 0.0 <= float(fallback) <= 1.0):
            raise ValueError(f"fallback must be 'local' or a number in [0, 1], got {fallback!r}")
        self.client = client
        self.fallback = fallback
        self.temperature = temperature
        self.max_tokens = max_tokens
        self._local = LocalJudge()

    def _fallback(self, thesis: ThesisClaims, ctx: JudgeContext) -> Verdict:
        if self.fallback == "local":
            v = self._local.judge(thesis, ctx)
            return Verdict(v.factuality, v.deduction, v.consistency, "llm failed: local verdict", "fallback")
        x = float(self.fallback)
        return Verdict(x, x, x, "llm failed: constant fallback", "fallback")

    async def ajudge_batch(self, items: Sequence[tuple[ThesisClaims, JudgeContext]]) -> list[Verdict]:
        answers = await self.client.ajson_batch(
            [judge_messages(t, c) for t, c in items], JudgeAnswer,
            temperature=self.temperature, max_tokens=self.max_tokens,
        )
        out = []
        for (t, c), a in zip(items, answers, strict=False):
            out.append(self._fallback(t, c) if a is None else
                       Verdict(a.factuality, a.deduction, a.consistency, a.rationale, "llm"))
        return out

    def judge_batch(self, items: Sequence[tuple[ThesisClaims, JudgeContext]]) -> list[Verdict]:
        return self.client.run(lambda: self.ajudge_batch(items))


def make_judge(kind: Any = "local", **options: Any) -> LocalJudge | LLMJudge:
    if not isinstance(kind, str):
        return kind
    if kind == "local":
        if options:
            raise TypeError(f"judge='local' takes no options, got {sorted(options)}")
        return LocalJudge()
    if kind == "llm":
        return LLMJudge(**options)
    raise ValueError(f"unknown judge {kind!r}; expected 'local' or 'llm'")


__all__ = [
    "JUDGE_SYSTEM", "LEXICON", "NEGATIONS", "JudgeAnswer", "LLMJudge", "LocalJudge", "Verdict",
    "judge_messages", "make_judge", "stance", "stance_score",
]
