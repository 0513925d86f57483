"""The verifier's vocabulary: stance words, negations, hedges and fact terms, in one place.

The evidence reward and the Trade-R1 consistency judge read the same words: the judge scores the
stance of a text with `LEXICON` and `NEGATIONS`; both check that the facts a text states
(`FACT_TERMS`, matched by a crude stem) are held by the evidence it relies on; and the evidence
reward refuses an ellipsis ("...") quote that leaves out a word which changes what the evidence
says (`protected_word`: a negation, a hedge or modal, a direction or stance word, a fact term, an event
verb with an opposite, or a number).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

from thesisgym.thesis import DOWN_WORDS, UP_WORDS

__all__ = [
    "EVENT_VERBS",
    "FACT_TERMS",
    "HEDGES",
    "LEXICON",
    "NEGATIONS",
    "all_stems",
    "fact_stems",
    "fact_support",
    "invented_facts",
    "protected_word",
    "stem",
]

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
    ["not", "no", "never", "without", "nor", "fails", "fail", "failed", "neither", "isn't", "wasn't", "didn't",
     "doesn't", "don't", "won't", "cannot", "hardly", "barely", "lacks", "lack", "aren't", "weren't", "can't",
     "couldn't", "shouldn't", "wouldn't", "hasn't", "haven't", "hadn't", "none", "nothing", "denies", "denied"]
)
# words that make a statement conditional or second-hand: "may cut", "plans to buy", "reportedly"
HEDGES = frozenset(
    ["may", "might", "could", "would", "should", "can", "will", "expects", "expect", "expected", "plans", "plan",
     "planned", "considers", "considering", "weighs", "reportedly", "rumored", "rumoured", "proposed", "proposes",
     "seeks", "seeking", "aims", "hopes", "if", "unless", "possible", "possibly", "potential", "likely",
     "unlikely", "forecast", "forecasts", "estimates", "estimated", "talks", "mulls"]
)
# verbs whose opposite flips an event ("opens" / "closes" an office, "resumes" / "halts" output)
EVENT_VERBS = frozenset(
    ["open", "opens", "opened", "close", "closes", "closed", "hold", "holds", "held", "add", "adds", "added",
     "start", "starts", "started", "stop", "stops", "stopped", "end", "ends", "ended", "resume", "resumes",
     "resumed", "halt", "halts", "halted", "suspend", "suspends", "suspended", "reinstate", "reinstates",
     "reject", "rejects", "rejected", "block", "blocks", "blocked", "win", "won", "lose", "keep", "keeps",
     "kept", "drop", "abandon", "abandons", "abandoned", "delay", "delays", "delayed", "expand", "expanded",
     "shrink", "shrank", "increase", "increased", "decrease", "decreased", "exit", "exits", "enter", "enters"]
)
_SINGLE_STANCE = frozenset(k for k in LEXICON if " " not in k)
_TOKEN_EDGE = ".,;:!?()[]{}'\"`"


def protected_word(token: str) -> bool:
    """Whether leaving `token` out of a quote can change what the quote says: a negation (also any
    "...n't"), a hedge or modal, a direction or stance word, a fact term or an event verb with an
    opposite (`EVENT_VERBS`), or anything with a digit."""
    w = token.lower().strip(_TOKEN_EDGE)
    if not w:
        return False
    if any(ch.isdigit() for ch in w):
        return True
    return (
        w in NEGATIONS
        or w.endswith("n't")
        or w in HEDGES
        or w in UP_WORDS
        or w in DOWN_WORDS
        or w in _SINGLE_STANCE
        or w in FACT_TERMS
        or w in EVENT_VERBS
    )


# --- facts ---------------------------------------------------------------------------------------------
# Words that state a fact about the company or its market (actors, corporate events, business
# figures). A text may judge its evidence in any words, but each fact it states must be found in
# that evidence: "the chief executive resigned", "record orders from a new customer" are facts,
# "reads as constructive for the stock" is a view. Matched by stem (`stem`), so "approved" is
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
# ASCII bytes -> the lower-cased letter, every other byte a space: `fact_words` of an ASCII text is
# then one bytes.translate and a split (C-level; the regex scan is the costlier part per opinion)
_LETTER_BYTES = bytes(c + 32 if 65 <= c <= 90 else c if 97 <= c <= 122 else 32 for c in range(256))


def fact_words(text: str) -> list[str]:
    """The words of `text` as facts are matched: `[a-z]+` runs of `text.lower()`, in order."""
    if text.isascii():
        return text.encode("ascii").translate(_LETTER_BYTES).decode("ascii").split()
    return _FACT_WORD_RE.findall(text.lower())


@lru_cache(maxsize=1 << 16)
def stem(word: str) -> str:
    """Crude stem: one plural/tense suffix off (keeping 4+ letters), then the first 6 letters."""
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 4:
            word = word[: -len(suffix)]
            break
    return word[:6]


@lru_cache(maxsize=1 << 16)
def fact_stems(text: str) -> frozenset[str]:
    """Stems of the FACT_TERMS that `text` states."""
    words = fact_words(text) if isinstance(text, str) else []
    return frozenset(map(stem, (w for w in words if w in FACT_TERMS)))


@lru_cache(maxsize=1 << 16)
def all_stems(text: str) -> frozenset[str]:
    """Stems of every word of `text` (what a fact stem is looked up in)."""
    return frozenset(map(stem, fact_words(text))) if isinstance(text, str) else frozenset()


def fact_support(text: str, evidence_texts: Iterable[str]) -> float:
    """Share of the facts `text` states (FACT_TERMS, by stem) that `evidence_texts` hold; 1 when it
    states none."""
    facts = fact_stems(text)
    if not facts:
        return 1.0
    held: set[str] = set()
    for t in evidence_texts:
        held.update(all_stems(t))
        if facts <= held:
            return 1.0
    return len(facts & held) / len(facts)


# --- invented facts: the hard check ---------------------------------------------------------------------
# The FACT_TERMS that an honest reading paraphrases (a "beat" for a positive surprise, "guidance",
# "earnings" for an EPS line) are judged softly, by the consistency judge's fact support. Every other
# fact a text states must be held by its evidence or the text invents it (a hallucination of the
# evidence reward, wherever it is written): an actor, a corporate event or a product (FACT_TERMS
# outside READING_TERMS), and a name (a word written capitalised inside a sentence: a person, a
# product, a place, a company) that no evidence text writes. Numbers are checked apart (exactly).
READING_TERMS = frozenset("""
earnings revenue revenues sales profit profits eps guidance forecast shipments deliveries subscribers users
upgrade upgrades upgraded downgrade downgrades downgraded beat beats missed misses management
""".split())  # noqa: SIM905
# actors and generic business nouns an honest reading names in its own words ("the finance chief" for a
# CFO, "the product" for a named phone): judged softly too
ACTOR_TERMS = frozenset("""
ceo cfo coo cto chairman chairwoman chief executive executives founder president board directors manager
product products stake client clients partner partners deal deals facility facilities store stores
""".split())  # noqa: SIM905
_EVENT_TERMS = FACT_TERMS - READING_TERMS - ACTOR_TERMS
_EVENT_STEMS = frozenset(map(stem, _EVENT_TERMS))
# capitalised words that name no fact: labels, sections, calendar and reporting words
_NOT_NAMES = frozenset("""
i q1 q2 q3 q4 fy h1 h2 strong_buy strong_sell buy sell hold strong usd eur gbp us eps sma ema rsi macd
technical fundamentals news insider analyst macro monday tuesday wednesday thursday friday january
february march april may june july august september october november december
""".split())  # noqa: SIM905
_SENTENCE_WORD_RE = re.compile(r"(?:^|(?<=[.!?;:]\s)|(?<=[.!?;:]))\s*([A-Za-z][\w'&-]*)|\b([A-Z][\w'&-]*)")


@lru_cache(maxsize=1 << 15)
def _names(text: str) -> frozenset[str]:
    """Lower-cased words written capitalised inside a sentence (not its first word)."""
    if text[1:].islower() or not text[1:].strip():  # no capital past the first letter (C-level test)
        return frozenset()
    out = set()
    for m in _SENTENCE_WORD_RE.finditer(text):
        w = m.group(2)
        if w and not w.isupper() or w and len(w) > 1 and w.isupper() and w.isalpha():
            low = w.lower().strip("'")
            if low not in _NOT_NAMES and len(low) > 1:
                out.add(low)
    return frozenset(out)


def invented_facts(text: str, evidence_texts: Iterable[str]) -> list[str]:
    """The facts `text` states that `evidence_texts` do not hold (see above): event and actor terms
    by stem, names by word; [] when it invents none."""
    if not isinstance(text, str) or not text:
        return []
    words = fact_words(text)
    facts = {} if _EVENT_TERMS.isdisjoint(words) else {stem(w): w for w in words if w in _EVENT_TERMS}
    names = _names(text)
    if not facts and not names:
        return []
    stems: set[str] = set()
    words: set[str] = set()
    for t in evidence_texts:
        stems.update(all_stems(t))
        words.update(fact_words(t))
    missing = [w for s, w in facts.items() if s not in stems]
    missing += [n for n in sorted(names) if not all(p in words for p in _FACT_WORD_RE.findall(n))]
    return missing
