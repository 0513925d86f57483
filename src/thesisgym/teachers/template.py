"""TemplateTeacher: a deterministic rule-based analyst that writes canonical theses offline.

Why: distillation, SFT warm starts, tests and the demo need a teacher that needs no network, is
reproducible, and writes theses that are *grounded by construction* (real verbatim quotes, correct
citations, numbers only from the cited item) with a decision reached from the evidence by explicit
rules, never from the label. Its knobs make it imperfect on purpose so the rejection filter of
`thesisgym.teachers.distill` has something to reject.

Decision rules (documented, also in `item_stance` / `decide`):
1. Every evidence item gets a stance in [-1, 1] from the signals found in its text:
   - technical: close above/below a moving average (SMA/EMA; a lone "SMA(20) 78.87" item is compared
     with the latest close shown in the section) -> +1/-1; RSI above 55 -> +0.5, below 45 -> -0.5;
     MACD histogram sign -> +-0.5; a signed "return"/"change" percentage -> its sign.
   - fundamentals: signed "surprise" and "growth" percentages -> their signs.
   - every section: a keyword lexicon (beats/raises/upgrade/record... vs misses/cuts/downgrade/probe...)
     -> (pos - neg) / (pos + neg); insider "buy/purchase" vs "sell/sale".
   The item stance is the mean of the signals found (0 when none).
2. The overall score is tanh(sum over items of weight x stance / 2), an item's weight being its
   section's (technical 1, fundamentals 1, news 1, analyst 0.75, insider 0.5, macro 0.25) x
   exp(-age / 5 calendar days, counted back from the row's as-of date) x the size the item states
   (its first percentage / 5, capped at 20 %; 1 without one): fresh, large news moves the view, a
   stale or small one barely. On the synthetic market (docs/spec.md, section 9) this is how events
   move prices, and it reads the evidence close to a logistic reader fitted on it
   (bench/bench_reader_ceiling.py); the label is never read.
3. Score >= 0.5 -> STRONG_BUY, >= 0.15 -> BUY, > -0.15 -> HOLD, > -0.5 -> SELL, else STRONG_SELL;
   or, after `calibrate(rows)`, cut points at the schema.LABEL_QUANTILES of the rows' scores, so the
   teacher's class mix matches the label mix (the lexicon is not symmetric, fixed cuts lean bearish).

Bullets: one tag per section in `sections` that has evidence (a section without items is skipped).
By default (`bullets=None`) a section gets one bullet on each of the items the verifier expects an
honest thesis to cover (`consistency.judges.canonical_items`: the min(4, n) items with the strongest
stance, the newest first among equals), which is where the evidence reward's count term and the
judge's coverage saturate: the template writes the thesis the verifier scores highest for its
evidence, so any edit of it is a change for the worse (`thesisgym audit` checks that it is).
Conclusion: by default (`conclusion="prose"`) a sentence per section on its mean stance, then the
call. `conclusion="tally"` (the small-model demo) decides from what it writes: each section's verdict is
the sign of the summed direction of the items its bullets cite (`rewards.evidence.item_readings`, what the
verifier reads in them), the conclusion lists those verdicts with the net count so far after each
("technical bullish (one up), news bearish (even): net even, so buy."), and in forward mode the decision
is the final net (bullish minus bearish) through `tally_cuts` (symmetric by default; `calibrate` fits them to the label mix on the
rows' evidence, as it fits the score cuts, or with `tally="reward"`, the demo's, to the call per count that earns
the most decision reward on the rows' labels: `reward_cuts`). The decision is then a function of text the model wrote
itself, which a small model can learn; the rule-2 decision is not (docs/training.md, section 5h). A
running count, not a count of the list at its end: a 135M model copied the list but wrote the most
common count whatever the list said (section 5i).
`size_cut` sizes those verdicts: a cited item that states a move of at least `size_cut` % (its
first percentage, `stated_size`: "orders jump 7.3%") counts twice, "news strongly bullish (two up)",
and the bullet's quote then holds that figure where a credited run reading in the item's direction
does. A sign count throws away the size the evidence-only reader uses most; the demo does not use
it, because a 135M student did not learn it (docs/training.md, section 5o).
`pick="first"` gives the bullets of `bullets=(lo, hi)` to each section's first items (the prompt lists the
newest first) instead of random ones: the item to read is then always the same place in the prompt.
`compact=True` (the small-model demo) quotes the first run of words without a digit that the
verifier credits (longest first), and from the first word of the body only when the item has no such
run (price lines): a tiny model copies distinct words by plain induction but not digit strings, whose
digits recur all over the prompt (docs/training.md, section 4c). `bullets=(lo, hi)` instead draws
that many bullets per section on randomly chosen items, fewer when the section has fewer items (one
bullet per item, never a repeated citation). Each bullet is an opinion without digits plus a
verbatim quote of `quote_words` (default 4-12) words from the cited item, so 15-90 words and
numbers only from that item.
Layout: by default (`layout="opinion"`) the opinion, then the quote, then the id. `layout="id"` (the
small-model demo) writes the id, the quote, then the verdict (`- [N1] "faces regulatory probe": the news
evidence is worrying ...`) and `layout="quote"` the quote, the id, then the verdict: a small model picks
the item first, copies from it, and states a direction after the words that carry it, instead of
committing to a direction before it has chosen what to quote. The quote then carries the item's
direction where one of its credited spans does (`rewards.reading.item_reading` of the span alone), so the
verdict can be read off the words just copied (docs/training.md, section 5g).
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import date

from thesisgym.consistency.judges import canonical_items
from thesisgym.rewards.base import EvidenceIndex, evidence_index
from thesisgym.rewards.decision import DecisionMatrix, load_decision_matrix
from thesisgym.rewards.evidence import item_readings, prompt_close, quote_credited
from thesisgym.rewards.reading import item_reading
from thesisgym.schema import LABEL_QUANTILES, LABELS, SECTIONS
from thesisgym.teachers.base import check_row

SECTION_WEIGHTS: dict[str, float] = {
    "technical": 1.0, "fundamentals": 1.0, "news": 1.0, "analyst": 0.75, "insider": 0.5, "macro": 0.25,
}
# rule 2: an item's weight decays with its age (news of a week ago has mostly been priced) and grows
# with the size it states (a 12 % order jump says more than a 1 % one)
RECENCY_DAYS = 5.0
SIZE_UNIT, SIZE_CAP = 5.0, 20.0
SCORE_SCALE = 2.0
_PCT = re.compile(r"(\d+(?:\.\d+)?)\s*%")
# (lower bound of score, label), checked in order; anything below the last bound is STRONG_SELL
DECISION_CUTS: tuple[tuple[float, str], ...] = ((0.5, "STRONG_BUY"), (0.15, "BUY"), (-0.15 + 1e-12, "HOLD"),
                                                 (-0.5 + 1e-12, "SELL"))
# the net count of a tally conclusion (bullish minus bearish sections) -> decision, before `calibrate`
TALLY_CUTS: tuple[tuple[float, str], ...] = ((1.5, "STRONG_BUY"), (0.5, "BUY"), (-0.5, "HOLD"), (-1.5, "SELL"))

# the small-model style the demo distils (`thesisgym distill --style compact`): one short-quoted bullet on
# each section's first item, id before quote before verdict, and a call counted from the verdicts written
# (docs/training.md, sections 4c, 5g and 5h)
COMPACT_STYLE: dict[str, object] = dict(bullets=(1, 1), quote_words=(3, 5), think=False, compact=True, layout="id",
                                        conclusion="tally", pick="first")

_POS = ("beat", "beats", "raise", "raises", "raised", "upgrade", "upgrades", "upgraded", "record", "strong",
        "gain", "gains", "wins", "win", "growth", "grows", "expand", "expands", "surge", "surges", "jump",
        "jumps", "outperform", "bullish", "boost", "boosting", "rally", "rallies", "buy", "buys", "purchase",
        "purchases", "accelerate", "accelerates", "improve", "improves", "exceed", "exceeds", "above", "up",
        "higher", "opens", "launches", "approval", "approved", "overweight", "rises", "rise", "beating")
_NEG = ("miss", "misses", "missed", "cut", "cuts", "cutting", "downgrade", "downgrades", "downgraded", "weak",
        "drop", "drops", "fall", "falls", "loses", "lose", "loss", "probe", "lawsuit", "slide", "slides", "shrink",
        "shrinks", "plunge", "plunges", "underperform", "bearish", "warning", "warns", "warn", "sell", "sells",
        "sale", "decline", "declines", "slump", "slumps", "below", "recall", "recalls", "fraud", "default",
        "down", "lower", "risk", "underweight", "halts", "delay", "delays", "investigation", "resigns")
_POS_SET, _NEG_SET = frozenset(_POS), frozenset(_NEG)
_WORD = re.compile(r"[A-Za-z][A-Za-z\-]*")
_NUM = r"([-+\u2212]?\$?\d[\d,]*(?:\.\d+)?)"
# a close price, not "z-score(20) of close 0.80" (a z-score is no price)
_CLOSE = r"(?<!of )\bclose\s*[:=]?\s*"
# "(14)" / "(12,26,9)" parameter lists after an indicator name are not its value
_PARAMS = r"(?:\s*\([\d,\s]+\))?"


def _first(pattern: str, text: str) -> float | None:
    m = re.search(pattern, text, flags=re.IGNORECASE)
    if not m:
        return None
    raw = m.group(1).replace("\u2212", "-").replace("$", "").replace(",", "")
    try:
        return float(raw)
    except ValueError:
        return None


def _sign(x: float) -> float:
    return 1.0 if x > 0 else (-1.0 if x < 0 else 0.0)


def reference_close(evidence: Sequence[dict]) -> float | None:
    """The latest close shown in the technical section (the first item that states one)."""
    for it in evidence:
        if it.get("section") == "technical":
            close = _first(_CLOSE + _NUM, str(it.get("text", "")))
            if close is not None and close > 0:
                return close
    return None


def item_stance(item: dict, *, ref_close: float | None = None) -> float:
    """Stance in [-1, 1] of one evidence item from the signals in its text (module docstring, rule 1).

    `ref_close` (the latest close, see `reference_close`) lets a lone "SMA(20) 78.87" item be read
    as price above/below its average.
    """
    text = str(item.get("text", ""))
    signals: list[float] = []
    close = _first(_CLOSE + _NUM, text)
    ma = _first(r"\b(?:sma|ema)" + _PARAMS + r"\d*\s*[:=]?\s*" + _NUM, text)
    close = close if close is not None and ma is not None else ref_close
    if close is not None and ma is not None and close != ma:
        signals.append(_sign(close - ma))
    rsi = _first(r"\brsi" + _PARAMS + r"\d*\s*[:=]?\s*" + _NUM, text)
    if rsi is not None:
        signals.append(0.5 if rsi > 55 else (-0.5 if rsi < 45 else 0.0))
    hist = _first(r"histogram\s*[:=]?\s*" + _NUM, text)
    if hist is not None and hist != 0:
        signals.append(0.5 * _sign(hist))
    for pattern in (r"\b(?:return|change)(?:\s+\d+d)?\s*[:=]?\s*" + _NUM + r"\s*%",
                    r"surprise\D{0,12}?" + _NUM + r"\s*%", _NUM + r"\s*%\s*surprise",
                    r"growth\D{0,12}?" + _NUM + r"\s*%"):
        val = _first(pattern, text)
        if val is not None and val != 0:
            signals.append(_sign(val))
    words = [w.lower() for w in _WORD.findall(text)]
    pos = sum(w in _POS_SET for w in words)
    neg = sum(w in _NEG_SET for w in words)
    if pos + neg:
        signals.append((pos - neg) / (pos + neg))
    if not signals:
        return 0.0
    return max(-1.0, min(1.0, sum(signals) / len(signals)))


def section_scores(evidence: Sequence[dict], sections: Sequence[str]) -> dict[str, float]:
    """Mean item stance per section that has items (a per-section summary; the decision weighs items by
    recency and size instead, `evidence_score`)."""
    out: dict[str, float] = {}
    ref = reference_close(evidence)
    for sec in sections:
        items = [it for it in evidence if it.get("section") == sec]
        if items:
            out[sec] = sum(item_stance(it, ref_close=ref) for it in items) / len(items)
    return out


def score_to_label(score: float, cuts: Sequence[tuple[float, str]] = DECISION_CUTS) -> str:
    """Map an overall stance score to a decision (rule 3)."""
    for bound, label in cuts:
        if score >= bound:
            return label
    return "STRONG_SELL"


def _day(value: object) -> date | None:
    try:
        return date.fromisoformat(str(value)[:10])
    except ValueError:
        return None


def item_weight(item: dict, today: date | None) -> float:
    """How much one item moves the overall score besides its stance (rule 2): its section's weight x
    exp(-age / RECENCY_DAYS) (age in calendar days before `today`; 1 without dates) x the size it
    states (its first percentage, capped at SIZE_CAP, in units of SIZE_UNIT; 1 without one)."""
    w = SECTION_WEIGHTS.get(str(item.get("section", "")), 0.5)
    published = _day(item.get("date"))
    if today is not None and published is not None:
        w *= math.exp(-max((today - published).days, 0) / RECENCY_DAYS)
    size = stated_size(item)
    if size is not None:
        w *= min(size, SIZE_CAP) / SIZE_UNIT
    return w


def stated_size(item: dict) -> float | None:
    """The size an item states: its first percentage, unsigned (None without one). An order jump of
    12 % or a 4 % surprise says more than a 1 % one; rule 2 weighs items by it and a sized tally verdict
    (`TemplateTeacher(size_cut=...)`) doubles on it."""
    pct = _PCT.search(str(item.get("text", "")))
    return None if pct is None else abs(float(pct.group(1)))


def evidence_score(evidence: Sequence[dict], sections: Sequence[str], *, asof: object = None) -> float:
    """The overall score of rule 2: tanh(sum of item_weight x stance / SCORE_SCALE) over the items of
    `sections`, ages counted from `asof` (default: the newest item's date); 0 without evidence."""
    items = [it for it in evidence if it.get("section") in set(sections)]
    if not items:
        return 0.0
    dated = [d for d in (_day(it.get("date")) for it in items) if d is not None]
    today = _day(asof) if asof is not None else None
    today = today or (max(dated) if dated else None)
    ref = reference_close(evidence)
    total = sum(item_weight(it, today) * item_stance(it, ref_close=ref) for it in items)
    return math.tanh(total / SCORE_SCALE)


def decide(evidence: Sequence[dict], sections: Sequence[str], *,
           cuts: Sequence[tuple[float, str]] = DECISION_CUTS, asof: object = None) -> tuple[str, float]:
    """(decision, overall score) from the evidence alone: the rules of the module docstring."""
    overall = evidence_score(evidence, sections, asof=asof)
    return score_to_label(overall, cuts), overall


def _section_verdict(items: Sequence[dict], readings: dict[str, int], size_cut: float | None = None) -> int:
    """A tally thesis's verdict on a section: the sign of the summed reading (`item_readings`) of the
    items its bullets cite, in {-1, 0, +1}. With `size_cut`, doubled ("strongly bullish") when one of
    those items reads in that direction and states a size of at least `size_cut` % (`stated_size`): a
    7 % order jump moves next week's price more than a 1 % one; two small items stay one step."""
    def reading(it: dict) -> int:
        return readings.get(str(it["id"]).strip().upper(), 0)

    verdict = int(_sign(sum(reading(it) for it in items)))
    if size_cut is not None and verdict and any(reading(it) == verdict and (stated_size(it) or 0.0) >= size_cut
                                                for it in items):
        return 2 * verdict
    return verdict


def _net_words(net: int) -> str:
    return "even" if net == 0 else f"{_COUNT_WORDS[min(abs(net), len(_COUNT_WORDS) - 1)]} {'up' if net > 0 else 'down'}"


def _tally(pulls: dict[str, int], decision: str) -> str:
    """'technical bullish (one up), news bearish (even), macro neutral (even): net even, so hold.'
    (`pulls`: each section's verdict in {-1, 0, +1}, or {-2, ..., +2} sized). The count runs along the list: each step adds one
    verdict to the count just written, so the net that the call reads sits right before it."""
    call = decision.replace("_", " ").lower()
    if not pulls:
        return f"no usable evidence, so {call}."
    steps, net = [], 0
    for sec, v in pulls.items():
        net += v
        steps.append(f"{sec} {_PULL_WORD[v]} ({_net_words(net)})")
    # counts in words: a digit in a conclusion is a number claim the verifier checks against the evidence
    return f"{', '.join(steps)}: net {_net_words(net)}, so {call}."


def calibrated_cuts(scores: Sequence[float], quantiles: Sequence[float] = LABEL_QUANTILES) -> tuple[tuple[float, str], ...]:
    """Cut points putting `scores` into the label mix of schema.LABEL_QUANTILES (rule 3, calibrated).

    Uses only the evidence scores of the rows, never their labels: the teacher's class mix then
    matches the labels' by construction, while which row gets which class stays evidence-driven.
    """
    import numpy as np

    vals = np.asarray([s for s in scores if s == s], dtype=float)
    if vals.size < 10:
        raise ValueError(f"calibrate: need at least 10 rows with evidence, got {vals.size}")
    q = np.quantile(vals, list(quantiles))
    # cut order in DECISION_CUTS is most bullish first
    return tuple((float(b), lab) for b, lab in zip(q[::-1], ("STRONG_BUY", "BUY", "HOLD", "SELL"), strict=True))


def reward_cuts(nets: Sequence[int], labels: Sequence[str], *, matrix: DecisionMatrix | None = None,
                min_rows: int = 20) -> tuple[tuple[float, str], ...]:
    """Tally cuts that earn the most decision reward on labelled rows: the monotone map from a tally's
    net count to a decision (a higher count never gives a more bearish call) maximising the summed
    `matrix` reward (`rewards.decision.load_decision_matrix()` by default: "calibrated", so the most
    accurate map) of `labels` (one per row, of the row whose count is in `nets`).

    `calibrated_cuts` matches the label mix instead, which is not what the trained decision reward
    pays: on the demo market a net of -3 is most often HOLD, yet the label-mix cuts call it
    STRONG_SELL (docs/training.md, section 5n). A count seen on fewer than `min_rows` rows is pooled
    with its neighbours toward 0 until it has that many (a rare extreme count says little alone).
    Only the labels of the rows given (the train split) are used; a row's own decision never sees its
    label."""
    if len(nets) != len(labels):
        raise ValueError(f"reward_cuts: {len(nets)} net counts but {len(labels)} labels")
    bad = sorted({str(lab) for lab in labels if lab not in LABELS})
    if bad:
        raise ValueError(f"reward_cuts: labels must be in {list(LABELS)}, got {bad[:3]}")
    if len(nets) < 10:
        raise ValueError(f"reward_cuts: need at least 10 labelled rows, got {len(nets)}")
    m = matrix or load_decision_matrix()
    by: dict[int, Counter] = {}
    for net, lab in zip(nets, labels, strict=True):
        by.setdefault(int(net), Counter())[lab] += 1
    values = sorted(by)
    gains = []
    for v in values:
        pooled, w = Counter(by[v]), v
        while sum(pooled.values()) < min_rows and w != 0:
            w += -1 if w > 0 else 1
            pooled += by.get(w, Counter())
        # summed, not n x the mean (`rewards.skill.constant_rewards`): a tie stays exact, so it goes to the lower class
        gains.append([sum(n * m(d, y) for y, n in pooled.items()) for d in LABELS])
    choice = _monotone_best(gains)
    # one cut per class, most bullish first: a class's bound is the midpoint below the lowest count
    # called that class or higher; counts beyond the fitted ones take the call at their end
    bounds: dict[str, float] = {}
    for k, lab in enumerate(LABELS[1:], start=1):
        ks = [i for i, c in enumerate(choice) if c >= k]
        bounds[lab] = math.inf if not ks else (-math.inf if ks[0] == 0 else values[ks[0]] - 0.5)
    return tuple((bounds[lab], lab) for lab in ("STRONG_BUY", "BUY", "HOLD", "SELL"))


def _monotone_best(gains: Sequence[Sequence[float]]) -> list[int]:
    """Class index per value (non-decreasing along the values) maximising the summed gain; ties go to
    the lower class. Back-pointers, not a recomputed difference, recover the path (float sums of a
    user's matrix need not subtract back exactly)."""
    k = len(LABELS)
    best, back = list(gains[0]), []
    for g in gains[1:]:
        arg, run, row, ptr = 0, -math.inf, [], []
        for c in range(k):
            if best[c] > run:
                arg, run = c, best[c]
            row.append(run + g[c])
            ptr.append(arg)
        best = row
        back.append(ptr)
    c = max(range(k), key=lambda j: (best[j], -j))
    out = [c]
    for ptr in reversed(back):
        c = ptr[c]
        out.append(c)
    return out[::-1]


# --- writing ---------------------------------------------------------------------------------------
# Opinions are assembled from four parts (subject, verdict, horizon, link), each dealt from a
# shuffled deck per thesis (a part comes back only after every other one has been used): 4 x 8 x 4
# x 4 combinations per stance, and no phrase recurs often enough in one thesis to read as a loop
# (rewards.loops), so an honest thesis carries no repetition penalty that an edit could remove.
_SUBJECTS = ("The {sec} evidence", "This {sec} item", "On the {sec} side the picture", "The {sec} reading here")
VERDICTS = {
    # one direction word per verdict, the rest shared by both directions: a small model trained on
    # verdicts with two cues ("a clear positive that should help the price hold its gains", "a negative
    # sign that leans toward trimming the stock") joined halves of two of them into opinions that argue
    # both ways ("a clear negative that leans toward owning the stock"; docs/verifier.md, v4.13)
    1: ("reads as constructive for the stock and its price",
        "tilts the balance toward upside for the shares",
        "looks like a clear positive for the price of the shares",
        "is encouraging for the shares at this point",
        "adds to the bullish case for the stock",
        "points to a favorable setup for the shares",
        "is a supportive sign for the stock at this stage",
        "reads as bullish for the shares on this evidence"),
    -1: ("reads as a warning for the stock and its price",
         "tilts the balance toward downside for the shares",
         "looks like a clear negative for the price of the shares",
         "is worrying for the shares at this point",
         "adds to the bearish case for the stock",
         "points to an unfavorable setup for the shares",
         "is a negative sign for the stock at this stage",
         "reads as bearish for the shares on this evidence"),
    0: ("is mixed and does not move the view much in either direction",
        "is close to neutral and mostly sets the context",
        "looks balanced, neither a strong reason to buy nor one to sell",
        "leaves the overall view roughly where it was",
        "carries little weight either way for the view",
        "neither helps nor hurts the case much on its own",
        "is informative but leaves the balance as it was",
        "adds context without tilting the view one way or the other"),
}
_HORIZONS = ("over the coming week", "while this lasts", "in the days ahead", "for the holding period")
_LINKS = ("since the item reports", "because the record shows", "as the source says", "given that")


class _Decks:
    """Per-thesis shuffled decks of opinion parts: each part is dealt again only once all the others
    of its deck have been (so a thesis repeats no phrase before it has to)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.decks: dict[object, list[str]] = {}

    def deal(self, key: object, parts: Sequence[str]) -> str:
        deck = self.decks.get(key)
        if not deck:
            deck = self.decks[key] = list(parts)
            self.rng.shuffle(deck)
        return deck.pop()


_LEAN = {1: "leans bullish", 0: "is roughly neutral", -1: "leans bearish"}
_PULL_WORD = {2: "strongly bullish", 1: "bullish", 0: "neutral", -1: "bearish", -2: "strongly bearish"}
# at most the six sections, twice each with sized verdicts
_COUNT_WORDS = ("none", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven",
                "twelve")


def _quote_span(text: str, rng: random.Random, *, lo: int = 4, hi: int = 12,
                accept: Callable[[str], bool] | None = None, tries: int = 12, from_start: bool = False) -> str:
    """A verbatim run of 4-12 whole words of `text` (never containing a double quote).

    `accept` (the verifier's `quote_credited` for this item) rejects spans the evidence reward
    would not pay for (uninformative, a number cut from its unit); up to `tries` random spans are
    drawn, then the first acceptable longest span, then the last draw. `from_start` first tries
    runs from the first word of the body (a drawn length, then longer ones) before those.
    """
    words = text.replace('"', " ").split()

    def draw(k: int, start: int) -> str:
        quote = " ".join(words[start:start + k]).rstrip(".,;:")
        # a quote must be a substring of the item text; double-quote removal could break that
        return quote if quote and quote in text else text.strip().replace('"', "'")

    if len(words) <= hi:
        return draw(len(words), 0)
    if from_start:
        for k in range(rng.randint(lo, hi), hi + 1):
            if accept is None or accept(draw(k, 0)):
                return draw(k, 0)
    quote = ""
    for _ in range(tries if accept is not None else 1):
        k = rng.randint(lo, hi)
        quote = draw(k, rng.randint(0, len(words) - k))
        if accept is None or accept(quote):
            return quote
    for start in range(len(words) - hi + 1):
        if accept(draw(hi, start)):
            return draw(hi, start)
    return quote


def _word_span(text: str, *, lo: int, hi: int, accept: Callable[[str], bool] | None = None,
               digits: bool = False) -> str | None:
    """The first run of `lo`..`hi` whole words of `text` that `accept` credits: without a digit,
    longest (`hi`) first; with `digits`, any run, shortest first (a price bar's "volume 982757 change
    -2.69%" rather than a longer run with more figures to copy). None when no run is credited.

    Why no digits by default: a small model copies a run of distinct words by plain induction (find the
    previous occurrence of the current word, emit what followed it); digit strings defeat that, because
    every digit recurs all over the prompt. Price and indicator lines have no such run.
    """
    words = text.replace('"', " ").split()
    lengths = range(lo, min(hi, len(words)) + 1) if digits else range(min(hi, len(words)), lo - 1, -1)
    for k in lengths:
        for start in range(len(words) - k + 1):
            quote = " ".join(words[start:start + k]).strip(".,;:")
            if (quote and quote in text and (digits or not any(ch.isdigit() for ch in quote))
                    and (accept is None or accept(quote))):
                return quote
    return None


def _row_key(row: dict) -> int:
    ident = json.dumps([row.get("ticker"), row.get("asof"), row.get("variation"),
                        [it.get("id") for it in row["evidence"]], [it.get("text") for it in row["evidence"]][:3]],
                       default=str)
    return int(hashlib.sha256(ident.encode()).hexdigest()[:12], 16)


class TemplateTeacher:
    """Rule-based analyst (see module docstring). Deterministic per (seed, row, sample seed).

    Knobs (probabilities in [0, 1]): `noise` corrupts each bullet with that probability (a
    shuffled citation, a fabricated number or an altered quote); `wrong_decision_rate` replaces the
    rule-based decision by a different class; `drop_section_rate` omits a section. `mode="reverse"`
    writes a rationalisation of the row's label (reverse distillation): the decision is the label
    and bullets that agree with it are preferred. `conclusion="tally"` decides from the verdicts the
    thesis writes through `tally_cuts` (its `wrong_decision_rate` then replaces that decision);
    `pick="first"` cites each section's first items; `size_cut` doubles a tally verdict on a large
    stated move.
    """

    def __init__(
        self,
        *,
        noise: float = 0.0,
        wrong_decision_rate: float = 0.0,
        drop_section_rate: float = 0.0,
        bullets: tuple[int, int] | None = None,
        seed: int = 0,
        mode: str = "forward",
        think: bool = True,
        cuts: Sequence[tuple[float, str]] | None = None,
        quote_words: tuple[int, int] = (4, 12),
        compact: bool = False,
        conclusion: str = "prose",
        layout: str = "opinion",
        pick: str = "random",
        tally_cuts: Sequence[tuple[float, str]] | None = None,
        size_cut: float | None = None,
    ) -> None:
        for name, p in (("noise", noise), ("wrong_decision_rate", wrong_decision_rate),
                        ("drop_section_rate", drop_section_rate)):
            if not isinstance(p, (int, float)) or not 0.0 <= float(p) <= 1.0:
                raise ValueError(f"TemplateTeacher: `{name}` must be a probability in [0, 1], got {p!r}")
        if bullets is not None and (len(tuple(bullets)) != 2 or not all(isinstance(b, int) for b in bullets)
                                    or not 1 <= bullets[0] <= bullets[1]):
            raise ValueError(f"TemplateTeacher: `bullets` must be None or (lo, hi) ints with 1 <= lo <= hi, "
                             f"got {bullets!r}")
        if (len(tuple(quote_words)) != 2 or not all(isinstance(b, int) for b in quote_words)
                or not 1 <= quote_words[0] <= quote_words[1]):
            raise ValueError(f"TemplateTeacher: `quote_words` must be (lo, hi) ints with 1 <= lo <= hi, got {quote_words!r}")
        if conclusion not in ("prose", "tally"):
            raise ValueError(f"TemplateTeacher: `conclusion` must be 'prose' or 'tally', got {conclusion!r}")
        if layout not in ("opinion", "quote", "id"):
            raise ValueError(f"TemplateTeacher: `layout` must be 'opinion', 'quote' or 'id', got {layout!r}")
        if mode not in ("forward", "reverse"):
            raise ValueError(f"TemplateTeacher: `mode` must be 'forward' or 'reverse', got {mode!r}")
        if pick not in ("random", "first"):
            raise ValueError(f"TemplateTeacher: `pick` must be 'random' or 'first', got {pick!r}")
        if size_cut is not None and (conclusion != "tally" or isinstance(size_cut, bool)
                                     or not isinstance(size_cut, (int, float)) or not 0 < size_cut < math.inf):
            raise ValueError(f"TemplateTeacher: `size_cut` must be None or a positive percentage, and only a "
                             f"tally conclusion has sized verdicts; got size_cut={size_cut!r} with "
                             f"conclusion={conclusion!r}")
        self.noise = float(noise)
        self.wrong_decision_rate = float(wrong_decision_rate)
        self.drop_section_rate = float(drop_section_rate)
        self.bullets = None if bullets is None else (int(bullets[0]), int(bullets[1]))
        self.quote_words = (int(quote_words[0]), int(quote_words[1]))
        self.seed = int(seed)
        self.mode = mode
        self.think = think
        self.cuts = tuple(cuts) if cuts is not None else DECISION_CUTS
        self.compact = bool(compact)
        self.conclusion = conclusion
        self.layout = layout
        self.pick = pick
        self.tally_cuts = tuple(tally_cuts) if tally_cuts is not None else TALLY_CUTS
        self.size_cut = None if size_cut is None else float(size_cut)

    def calibrate(self, rows: Sequence[dict], *, tally: str = "mix") -> TemplateTeacher:
        """Fit the decision cut points on `rows`; returns self. The rule-2 score cuts always match the
        label mix (their evidence only, see `calibrated_cuts`). For `conclusion="tally"`, the cuts on the
        net count (`planned_net`): `tally="mix"` matches the label mix the same way; `tally="reward"`
        fits the map that earns the most decision reward on the rows' labels (`reward_cuts`; rows
        without a label are skipped)."""
        if tally not in ("mix", "reward"):
            raise ValueError(f"TemplateTeacher.calibrate: `tally` must be 'mix' or 'reward', got {tally!r}")
        self.cuts = calibrated_cuts([evidence_score(r["evidence"], r["sections"], asof=r.get("asof")) for r in rows])
        if self.conclusion == "tally" and tally == "mix":
            self.tally_cuts = calibrated_cuts([self.planned_net(r) for r in rows])
        elif self.conclusion == "tally":
            labelled = [r for r in rows if r.get("label") in LABELS]
            self.tally_cuts = reward_cuts([self.planned_net(r) for r in labelled], [r["label"] for r in labelled])
        return self

    def planned_net(self, row: dict) -> int:
        """Bullish minus bearish sections (doubled where sized) of a tally thesis on `row` without noise: with `pick="first"`
        the sections' first `bullets[0]` items, otherwise all their items (a random pick's expectation)."""
        evidence = [it for it in row["evidence"] if isinstance(it, dict) and it.get("id") and it.get("text")]
        readings = item_readings(evidence_index(row["evidence"]))
        net = 0
        for sec in row["sections"]:
            items = [it for it in evidence if it.get("section") == sec]
            if self.pick == "first" and self.bullets is not None:
                items = items[:self.bullets[0]]
            net += _section_verdict(items, readings, self.size_cut)
        return net

    def decision(self, row: dict) -> str:
        """The forward-mode decision for `row`, from its evidence alone (what `write` closes with
        before `wrong_decision_rate` and `drop_section_rate`; for a tally thesis with `pick="random"`,
        the count of `planned_net`)."""
        if self.conclusion == "tally":
            return score_to_label(self.planned_net(row), self.tally_cuts)
        evidence = [it for it in row["evidence"] if isinstance(it, dict) and it.get("id") and it.get("text")]
        sections = [s for s in row["sections"] if any(it.get("section") == s for it in evidence)]
        return decide(evidence, sections, cuts=self.cuts, asof=row.get("asof"))[0]

    def __repr__(self) -> str:
        return (f"TemplateTeacher(noise={self.noise}, wrong_decision_rate={self.wrong_decision_rate}, "
                f"drop_section_rate={self.drop_section_rate}, bullets={self.bullets}, seed={self.seed}, "
                f"mode={self.mode!r}, cuts={[(round(b, 4), lab) for b, lab in self.cuts]}"
                + (f", size_cut={self.size_cut!r}" if self.size_cut is not None else "") + ")")

    def write(self, row: dict, *, n: int = 1, seed: int = 0) -> list[str]:
        """`n` theses for `row`; sample i uses its own RNG so samples differ but repeat exactly."""
        check_row(row, who="TemplateTeacher.write")
        if not isinstance(n, int) or n < 1:
            raise ValueError(f"TemplateTeacher.write: n must be a positive int, got {n!r}")
        if self.mode == "reverse" and row.get("label") not in LABELS:
            raise ValueError(f"TemplateTeacher(mode='reverse'): row has no valid 'label' (got {row.get('label')!r})")
        key = _row_key(row)
        return [self._write_one(row, random.Random(hash((self.seed, seed, i, key)))) for i in range(n)]

    # --- one sample ---------------------------------------------------------------------------
    def _write_one(self, row: dict, rng: random.Random) -> str:
        evidence = [it for it in row["evidence"] if isinstance(it, dict) and it.get("id") and it.get("text")]
        sections = [s for s in row["sections"] if any(it.get("section") == s for it in evidence)]
        if self.mode == "reverse":
            decision = row["label"]
            overall = (LABELS.index(decision) - 2) / 2
        else:
            decision, overall = decide(evidence, sections, cuts=self.cuts, asof=row.get("asof"))
        wrong = bool(self.wrong_decision_rate) and rng.random() < self.wrong_decision_rate
        if wrong and self.conclusion != "tally":
            decision = rng.choice([lab for lab in LABELS if lab != decision])
        kept = [s for s in sections if not (self.drop_section_rate and rng.random() < self.drop_section_rate)]
        parts: list[str] = []
        if self.think:
            parts.append("<think>Score each section from its evidence, weigh the sections, then decide.</think>")
        blocks, leans, verdicts = self._sections(row, evidence, kept, overall, rng)
        parts.extend(blocks)
        if self.conclusion == "tally":
            if self.mode == "forward":  # the call follows the verdicts just written
                decision = score_to_label(sum(verdicts.values()), self.tally_cuts)
            if wrong:
                decision = rng.choice([lab for lab in LABELS if lab != decision])
            text = _tally(verdicts, decision)
        else:
            text = self._conclusion(leans, decision)
        parts.append(f"<conclusion>{text}</conclusion>")
        parts.append(f"<decision>{decision}</decision>")
        return "\n".join(parts)

    def _sections(self, row: dict, evidence: list[dict], kept: list[str], overall: float,
                  rng: random.Random) -> tuple[list[str], dict[str, int], dict[str, int]]:
        """(one tagged block per kept section, each section's mean-stance lean, each section's verdict:
        `_section_verdict` of the items its bullets cite)."""
        all_ids = [it["id"] for it in evidence]
        index = evidence_index(row["evidence"])
        readings = item_readings(index)
        blocks: list[str] = []
        leans: dict[str, int] = {}
        verdicts: dict[str, int] = {}
        decks = _Decks(rng)
        ref = reference_close(evidence)
        expected = canonical_items(evidence) if self.bullets is None else {}
        for sec in kept:
            items = [it for it in evidence if it.get("section") == sec]
            stances = {it["id"]: item_stance(it, ref_close=ref) for it in items}
            mean = sum(stances.values()) / len(stances)
            leans[sec] = 1 if mean >= 0.15 else (-1 if mean <= -0.15 else 0)
            if self.bullets is None:
                chosen = set(expected.get(sec, ()))
                order = [it for it in items if it["id"].strip().upper() in chosen]
            else:
                order = items[:]
            if self.pick == "random" or self.bullets is None:
                rng.shuffle(order)
            if self.mode == "reverse":
                want = _sign(overall)
                order.sort(key=lambda it: -want * stances[it["id"]])
            k = len(order) if self.bullets is None else min(len(order), rng.randint(*self.bullets))
            lines = [self._bullet(it, stances[it["id"]], sec, rng, all_ids, index, decks) for it in order[:k]]
            verdicts[sec] = _section_verdict(order[:k], readings, self.size_cut)
            blocks.append(f"<{sec}>\n" + "\n".join(lines) + f"\n</{sec}>")
        return blocks, leans, verdicts

    def bullet_for(self, row: dict, item_id: str, rng: random.Random) -> str:
        """One honest bullet on evidence item `item_id` of `row`, written as `write` writes it (the
        audit pads and rewrites theses with it; noise is not applied, nor `size_cut`'s quote of the size)."""
        evidence = [it for it in row["evidence"] if isinstance(it, dict) and it.get("id") and it.get("text")]
        item = next((it for it in evidence if it["id"] == item_id), None)
        if item is None:
            raise ValueError(f"TemplateTeacher.bullet_for: no evidence item {item_id!r} in the row")
        stance = item_stance(item, ref_close=reference_close(evidence))
        quiet = TemplateTeacher(bullets=self.bullets, quote_words=self.quote_words, compact=self.compact,
                                layout=self.layout)
        return quiet._bullet(item, stance, str(item.get("section", "")), rng, [it["id"] for it in evidence],
                             evidence_index(row["evidence"]))

    def _bullet(self, item: dict, stance: float, sec: str, rng: random.Random, all_ids: list[str],
                index: EvidenceIndex, decks: _Decks | None = None) -> str:
        # the verdict says what the verifier reads in the item (its direction, `rewards.reading`), so
        # an honest bullet is never paid less than the same bullet with its stance words piled up
        lean = item_readings(index).get(str(item["id"]).strip().upper(), 0)
        decks = decks or _Decks(rng)
        opinion = (f"{decks.deal('subject', _SUBJECTS).format(sec=sec)} {decks.deal(lean, VERDICTS[lean])} "
                   f"{decks.deal('horizon', _HORIZONS)}")
        if self.layout == "opinion":  # the opinion leads into its quote
            opinion += f", {decks.deal('link', _LINKS)}"
        def accept(q: str) -> bool:
            return quote_credited(q, item["id"], index)

        quote = None
        if self.layout != "opinion" and lean:
            # the quote alone must read in the item's direction: the verdict that follows it can then be
            # read off the words just copied ("faces regulatory probe": bearish), not off words left out
            close = prompt_close(index)
            def reads(q: str) -> bool:
                return accept(q) and item_reading(q, close, sec) == lean

            size = stated_size(item)
            if self.size_cut is not None and size is not None and size >= self.size_cut:
                # a sized verdict doubles on the size, so the size is among the words copied ("orders jump 7.3%")
                quote = _word_span(str(item["text"]), lo=self.quote_words[0], hi=self.quote_words[1], digits=True,
                                   accept=lambda q: reads(q) and stated_size({"text": q}) == size)
            quote = quote or self._quote(item, rng, reads, strict=True)
        quote = quote or self._quote(item, rng, accept)
        cite = item["id"]
        if self.noise and rng.random() < self.noise:
            kind = rng.choice(("cite", "number", "quote"))
            if kind == "cite":
                others = [i for i in all_ids if i != cite]
                cite = rng.choice(others) if others else f"{SECTIONS.get(sec, 'X')}{len(all_ids) + 9}"
            elif kind == "number":
                opinion = opinion.replace(" since", f" with a move of {rng.randint(41, 97)}.{rng.randint(1, 9)}% since", 1)
                if "%" not in opinion:
                    opinion += f" a gain of {rng.randint(41, 97)}.{rng.randint(1, 9)}% and"
            else:
                quote = " ".join(reversed(quote.split())) + " allegedly"
        if self.layout == "opinion":
            return f'- {opinion} "{quote}" [{cite}]'
        verdict = f"{opinion[0].lower()}{opinion[1:]}."
        if self.layout == "quote":  # the quote, its id, then the verdict on what was just quoted
            return f'- "{quote}" [{cite}]: {verdict}'
        return f'- [{cite}] "{quote}": {verdict}'  # "id": the item, what it says, then the verdict on it

    def _quote(self, item: dict, rng: random.Random, accept: Callable[[str], bool], *, strict: bool = False) -> str | None:
        """A quote of `item` that `accept` credits (`_word_span` first when compact, then `_quote_span`,
        whose last draw it falls back to); `strict`: None instead of a quote `accept` does not credit."""
        lo, hi = self.quote_words
        text = str(item["text"])
        quote = (_word_span(text, lo=lo, hi=hi, accept=accept) if self.compact else None) or \
            _quote_span(text, rng, lo=lo, hi=hi, accept=accept, from_start=self.compact)
        if strict and not accept(quote):  # random draws can miss the one run that reads (a price bar's
            return _word_span(text, lo=lo, hi=hi, accept=accept, digits=True)  # "change -2.69%"): try every run
        return quote

    @staticmethod
    def _conclusion(leans: dict[str, int], decision: str) -> str:
        if not leans:
            return f"There is no usable evidence, so the call defaults to {decision.replace('_', ' ').lower()}."
        views = "; ".join(f"the {sec} evidence {_LEAN[v]}" for sec, v in leans.items())
        return (f"Weighing the sections, {views}. Taken together the balance of evidence supports a "
                f"{decision.replace('_', ' ').lower()} view for a holding period of about a week.")
