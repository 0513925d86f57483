"""The verifier's vocabulary: stance words, negations, hedges and fact terms, in one place.

The evidence reward and the Trade-R1 consistency judge read the same words: the judge scores the
stance of a text with `LEXICON` and `NEGATIONS`; both check that the facts a text states
(`FACT_TERMS`, matched by a crude stem) are held by the evidence it relies on; and the evidence
reward refuses an ellipsis ("...") quote that leaves out a word which changes what the evidence
says (`protected_word`: a negation, a hedge or modal, a direction or stance word, a fact term, an event
verb with an opposite, or a number). Past the fact list, a clause that reports what happened may use
only a closed analysis vocabulary and the words of the prompt's evidence (`open_words`), and figures
written in words are read as figures (`spelled_figures`). An analyst's usual word for the event or party
the evidence names ("payout" for a dividend, "hired" for "names new": `SAME_EVENT_WORDS`), a role
acronym for the title it writes ("CFO": `ROLE_ACRONYMS`) and a measure's abbreviation for the words it
writes ("PT" for "price target": `TERM_ACRONYMS`) are held like the evidence's own words.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from functools import lru_cache

from thesisgym.thesis import DOWN_WORDS, UP_WORDS

__all__ = [
    "ACTIONS",
    "COMINGS_AND_GOINGS",
    "EVENT_VERBS",
    "FACT_TERMS",
    "HEDGES",
    "IDIOMS",
    "IDIOM_EVENT_WORDS",
    "LEXICON",
    "MOVE_VERBS",
    "NEGATIONS",
    "STANCE_VOCABULARY",
    "all_stems",
    "fact_stems",
    "fact_support",
    "held",
    "invented_facts",
    "open_words",
    "protected_word",
    "spelled_figures",
    "word_pool",
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
    # ordinary analyst words for good and bad news ("bookings accelerated", "margins are eroding")
    "accelerated": 0.75, "expanded": 0.75, "improvement": 0.75, "better than expected": 1.0, "stellar": 0.75, "impressive": 0.75,
    "solid": 0.5, "healthy": 0.5, "upbeat": 0.75, "outperformed": 0.75, "outperforming": 0.75, "cheap": 0.5,
    "eroding": -0.75, "eroded": -0.75, "erosion": -0.75, "slowing": -0.5, "slowed": -0.5, "weakening": -0.75,
    "weakened": -0.75, "disappointing": -0.75, "disappointed": -0.75, "disappoints": -0.75,
    "disappointment": -0.75, "worse than expected": -1.0, "collapse": -1.0, "collapsed": -1.0,
    "plummeted": -1.0, "plummets": -1.0, "tanked": -1.0, "sluggish": -0.5, "lackluster": -0.5,
    "underwhelming": -0.75, "dumping": -0.75, "dumped": -0.75,
    "expensive": -0.5, "overpriced": -0.75, "overhyped": -0.75,
    "overstretched": -0.5, "overextended": -0.5, "low quality": -0.5, "too optimistic": -0.5,
    "overly optimistic": -0.5, "own it": 0.5, "own the stock": 0.5, "own the shares": 0.5,
    # what the analyst would do with the stock: "leans toward owning", "argues for trimming" (words that
    # also name other things stay out: "own" is "its own", "reducing" may be debt, "adding" may be losses)
    "owning": 0.5, "buying": 0.5, "accumulating": 0.75, "adding exposure": 0.75, "selling": -0.5,
    "shorting": -0.5, "trimming": -0.5, "cutting exposure": -0.75, "reducing exposure": -0.75,
}
# the trader's idioms for the same actions ("take profits", "unload the shares", "stay out"): each names the
# analyst's own action only in a recommendation's frame (`reading._framed`: "I would take profits", "time to
# unload", "Load up."), never a company's or others' ("the company is loading up on debt", "new entrants stay
# out", "too early to take profits"). Only phrases whose words name no event: every word of a phrase joins the
# analysis vocabulary, so "exit the position" would make "the CFO's exit" analysis and hide it as an invented
# fact, "lock in gains" a contract locked in (or the word stays out of it: IDIOM_EVENT_WORDS)
_IDIOM_WEIGHTS: dict[str, float] = {
    "take profits": -0.5, "taking profits": -0.5, "profit taking": -0.5, "unload": -0.5, "unloading": -0.5,
    "stay out": -0.5, "staying out": -0.5, "stay away": -0.5, "staying away": -0.5, "get out": -0.5,
    "getting out": -0.5, "go short": -0.75, "going short": -0.75, "go long": 0.75, "going long": 0.75,
    "load up": 0.5, "loading up": 0.5, "take profit": -0.5, "taking profit": -0.5, "take some profits": -0.5,
    "take some profit": -0.5, "taking some profits": -0.5, "take partial profits": -0.5, "book profits": -0.5,
    "booking profits": -0.5, "cash out": -0.5, "cashing out": -0.5, "stay on the sidelines": -0.5,
    "staying on the sidelines": -0.5, "sit on the sidelines": -0.5, "wait on the sidelines": -0.5,
    "get the heck out": -0.5, "get the hell out": -0.5, "take your profits": -0.5, "take your profit": -0.5,
    "book gains": -0.5, "book some gains": -0.5, "fade": -0.5, "bail": -0.5, "bail out": -0.5, "stay long": 0.5,
}
LEXICON.update(_IDIOM_WEIGHTS)
# a price's or a measure's move in the other verbs analysts write for it ("the shares slipped", "revenue
# shrank", "the stock rebounded"): read for their direction only. As vocabulary they stay what they were
# (`STANCE_VOCABULARY`): several also report events ("the CEO retreated", "the deal skidded"), and
# a move verb in `_REPORT_PAST` would make "bounced back" report "back". Verbs whose other senses turn the
# direction stay out: "eased concerns", "pared losses", "erased gains", "the bubble popped", "buy the
# dips", "a dead-cat bounce", "recovered costs from insurers"
MOVE_VERBS: dict[str, float] = {
    "slipped": -0.75, "slips": -0.75, "retreated": -0.75, "retreats": -0.75, "sagged": -0.75, "sags": -0.75,
    "skidded": -0.75, "skids": -0.75, "shrank": -0.75, "dipped": -0.5,
    "rebounded": 0.75, "recovered": 0.75, "recovers": 0.75, "bounced": 0.5,
}
LEXICON.update(MOVE_VERBS)
# the stance words that are also analysis vocabulary: every stance word but the move verbs
STANCE_VOCABULARY = frozenset(k for k in LEXICON if k not in MOVE_VERBS)
IDIOMS = frozenset(_IDIOM_WEIGHTS)
# words of those idioms that name an event elsewhere ("the company booked a charge", "the CEO was
# sidelined"): they stay out of the analysis vocabulary, so such a report is still held to the evidence
IDIOM_EVENT_WORDS = frozenset(["book", "booking", "sidelines", "heck", "hell", "wait", "bail"])
# the action cues above (and the ratings) that "against" turns: "argues against owning it"
ACTIONS = frozenset(["buy", "sell", "short", "accumulate", "avoid", "long position", "short position", "owning",
                     "own it", "own the stock", "own the shares",
                     "buying", "accumulating", "adding exposure", "selling", "shorting", "trimming",
                     "cutting exposure", "reducing exposure"]) | IDIOMS
NEGATIONS = frozenset(
    ["not", "no", "never", "without", "nor", "fails", "fail", "failed", "neither", "isn't", "wasn't", "didn't",
     "doesn't", "don't", "won't", "cannot", "hardly", "barely", "lacks", "lack", "aren't", "weren't", "can't",
     "couldn't", "shouldn't", "wouldn't", "hasn't", "haven't", "hadn't", "none", "nothing", "denies", "denied",
     "nobody"]
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
_SINGLE_STANCE = frozenset(k for k in STANCE_VOCABULARY if " " not in k)
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
street
""".split())  # noqa: SIM905
_SENTENCE_WORD_RE = re.compile(r"(?:^|(?<=[.!?;:]\s)|(?<=[.!?;:]))\s*([A-Za-z][\w'&-]*)|\b([A-Z][\w'&-]*)")


@lru_cache(maxsize=1 << 15)
def _names(text: str) -> frozenset[str]:
    """Lower-cased words written capitalised inside a sentence (not its first word)."""
    if text[1:].islower() or not text[1:].strip():  # no capital past the first letter (C-level test)
        return frozenset()
    if "Wall Street" in text:  # the market's consensus, like "the Street" (_NOT_NAMES)
        text = text.replace("Wall Street", "Street")
    out = set()
    for m in _SENTENCE_WORD_RE.finditer(text):
        w = m.group(2)
        if w and not w.isupper() or w and len(w) > 1 and w.isupper() and w.isalpha():
            low = w.lower().strip("'")
            if low.endswith("'s"):  # a possessive names its owner ("the Street's", "Apple's")
                low = low[:-2]
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
    evidence_words: set[str] = set()
    spelled: list[str] = []  # each text's words, space-joined (`evidence_texts` may be read only once)
    for t in evidence_texts:
        stems.update(all_stems(t))
        stems.update(_phrase_keys_of(t))
        words_t = fact_words(t)
        evidence_words.update(words_t)
        spelled.append(" ".join(words_t))
    missing = [w for s, w in facts.items() if s not in stems and not _same_event_held(s, stems)]
    missing += [n for n in sorted(names) if not all(p in evidence_words for p in _FACT_WORD_RE.findall(n))
                and not _spelled_out(n, spelled)]
    return missing


# the role acronyms an analyst writes for a title the evidence spells out
ROLE_ACRONYMS: dict[str, tuple[str, ...]] = {
    "ceo": ("chief executive",), "cfo": ("chief financial officer", "finance chief"),
    "coo": ("chief operating officer",), "cto": ("chief technology officer",),
    "cio": ("chief information officer", "chief investment officer"), "cmo": ("chief marketing officer",),
}


# the abbreviations an analyst writes for a measure the evidence spells out ("PT" for "price target")
TERM_ACRONYMS: dict[str, tuple[str, ...]] = {
    "pt": ("price target",), "pts": ("price target", "price targets"), "yoy": ("year over year",),
    "qoq": ("quarter over quarter",), "fcf": ("free cash flow",), "ocf": ("operating cash flow",),
    "opex": ("operating expenses", "operating expense"),
    "capex": ("capital expenditure", "capital expenditures", "capital spending"),
    "asp": ("average selling price",), "asps": ("average selling prices", "average selling price"),
}  # not GM (gross margin) nor TTM: companies of those names
_ACRONYMS = ROLE_ACRONYMS | TERM_ACRONYMS


def _spelled_out(name: str, spelled: Sequence[str]) -> bool:
    """Whether `name` is a role acronym ("cfo") or a measure's abbreviation ("pt") whose words an
    evidence text writes ("chief financial officer", "price target"); `spelled`: each text's lower-case
    words, space-joined."""
    titles = _ACRONYMS.get(name)
    return titles is not None and any(t in e for e in spelled for t in titles)


# --- unsupported words: invented facts in any words ---------------------------------------------------------
# A word list of event terms cannot list every way to state an event ("the finance chief quit", "pulled
# from shelves", "the zephyr x2 rollout with orbis went ahead", "Belmont walked away"). The rule is
# closed the other way round: a clause that reports what happened (it holds a past-tense verb outside
# the analysis vocabulary: a word ending in -ed or an irregular past form) may use the analysis vocabulary below (function words,
# the lexicon, the reading, actor, hedge and negation terms, and the words analysts use to weigh
# evidence) and the words of the prompt's evidence; any other word it states is unsupported, and the
# text invents. A product code (letters and digits, "x2") and a name that opens a sentence are checked
# in every clause. Words are compared with their stems (`held`: "closed" is held by "Close"), so an
# honest restatement in the item's own words is never flagged.
FUNCTION_WORDS = frozenset("""
a an the this that these those there here it its it's they them their theirs he she him her his we us our
you your i me my one ones some any all both each every either neither other another such same own
is are was were be been being am do does did done doing have has had having will would shall should can
could may might must of to in on at by for from with without into onto out over under about above below
up down off through across after before during until since while as than then so if unless because though
although yet but and or nor not no also only just still even again already ever once twice more most less
least much many few fewer lot lots very quite rather too enough almost nearly about around roughly
what which who whom whose when where why how whether however therefore thus hence instead otherwise
meanwhile else per via vs versus like unlike against toward towards upon within beyond behind beside
besides between among amid despite except along alongside throughout past next last first second third
two three four five six seven eight nine ten half double single itself themselves
percent percentage pct cent cents dollar dollars usd basis bps thousand million billion trillion
""".split())  # noqa: SIM905
ANALYSIS_WORDS = frozenset("""
stock stocks share shares equity equities price prices priced pricing market markets trade trades traded
trading trader traders investor investors holder holders owner owning own owned position positions
exposure amount amounts stake view views case thesis call calls reading read reads item items
evidence record records
source sources section sections line lines report reports reported reporting data figure figures number
numbers detail details picture setup signal signals sign signs indicator indicators reading balance
weight weigh weighs weighed weighing context backdrop story narrative tone sentiment mood outlook
picture trend trends trending level levels range ranges band bands support resistance average averages
moving close closed closes closing open opened session sessions day days daily week weeks weekly
month months monthly quarter quarters quarterly year years annual period periods term horizon time
times today recent recently latest earlier later now currently current ahead coming near nearby
volume volumes volatility liquidity flow flows demand supply buyers sellers buying selling bid
valuation valuations multiple multiples value values valued cheap expensive rich premium discount
margin margins cash cost costs spending capital debt leverage balance sheet income operating
fundamental fundamentals technical technicals news insider insiders analyst analysts macro conclusion
decision strong_buy strong_sell hold holding holds held bullish bearish neutral mixed view
company companies firm business businesses sector sectors industry peers peer rival rivals competitor
competitors consumer consumers economy economic rate rates yield yields inflation policy central bank
growth growing grown expansion pressure pressures risk risks reward rewards return returns gain gains loss
points point pointing pointed argue argues argued arguing suggest suggests suggested suggesting show
shows showed showing shown indicate indicates indicated imply implies implied mean means meant tell
tells told say says said note notes noted noting see sees saw seen look looks looked looking seem seems
seemed appear appears appeared remain remains remained stay stays stayed keep keeps kept leave leaves
left lean leans leaned leaning tilt tilts tilted tilting favor favors favored favour favours favoured
help helps helped hurt hurts weigh make makes made take takes took taken give gives gave given get gets
got set sets put puts move moves moved moving matter matters mattered count counts counted carry
carries carried add adds added adding reduce reduces reduced trim trims trimmed trimming confirm
confirms confirmed reflect reflects reflected reflecting support supports supported supporting
suggest offset offsets outweigh outweighs outweighed justify justifies justified warrant warrants
change changes changed changing shift shifts shifted turn turns turned reach reaches reached hit
stand stands stood sit sits sat trade happen happens happened continue continues continued
expect expects expected expectation expectations estimate consensus surprise surprised surprises
surprising beat beats missed miss guidance target targets targeted rating ratings rated reiterated
reiterates reiterate maintained maintains maintain kept cover covering covered coverage
unchanged reaffirm reaffirms reaffirmed stick sticks stuck guide guides guided
clear clearly modest modestly slight slightly mild mildly moderate moderately solid firm firmly
healthy steady stable weak strong large small big high low higher lower highest lowest main major minor
key important notable significant meaningful little limited full fully overall broad broadly broader
real actual likely unlikely possible clean rare routine normal usual usually typical typically
good better best bad worse worst positive negative favorable unfavorable constructive supportive
encouraging worrying concerning cautious caution careful carefully calm alarming extreme
direction directional sign upside downside upward downward sideways flat higher lower rising falling
buy sell long short neutral underweight overweight allocation allocate trimming adding cutting
since given because thus therefore overall together taken weighing weighed combined combining net
summary sum total totals totalled totaled part parts rest whole
reason reasons because evidence enough much further partly mostly largely somewhat fairly
strength strengths weakness weaknesses concern concerns issue issues question questions doubt doubts
confidence conviction uncertainty uncertain certain sure unclear clarity noise noisy
momentum rally rallied pullback pullbacks dip dips bounce bounced rebound rebounded recovery recovered
run runs breakout breakdown overbought oversold upper lower mean stretched extended exhausted
room pause consolidation consolidating consolidated tape buyers control
profitability profitable efficiency discipline power mix conversion operations shareholders
returning return returned funded funding service servicing load
sentiment headline headlines backlog cycle replacement unit units respond responds
prior previous previously since earlier last latest recent newest oldest older old new
often fade fades faded durable segment segments fear fears feared institution institutions chain chains retail
chase chased interest breadth slow slows slowed cloud advertising hardware peak software renew renewed
scrutinise scrutinize fee fees litigation linger lingers lingered emerging inventory inventories tighten
tightened freight ease eased wages ample credit spread spreads narrow narrowed compress compresses options
skew flatten flattens breadth widen widens widened leadership rotate rotates rotated defensives lag lagged
cyclicals lead caps plateau cool cools cooled pivot pivots reprice repriced duration appetite crowded revise
revised cluster selectively filings patience auditors accounting conservative disclosures transparency
quality working releases maturities refinancing ratios agencies affirm affirmed hinge hinges recession odds
entry sizing stops belong quickly senior block blocks purchase purchases sale vote
come comes came coming go goes went gone going start starts started starting begin begins began begun let lets
praise praises praised criticise criticised criticize criticized piece article articles column writer
writers author newsletter commentary steep sharp sharply money soon
side sides well top bottom broker brokers aggregate aggregated finance financial financials embedded instruction
instructions blog post posts call analysis analytical weight weights basis bases part partial partly
know knows knew known knowing understand understood learn learned learnt realise realised realize realized
notice noticed believe believed think thinks thought feel feels felt quote quotes quoted
""".split())  # noqa: SIM905
_IRREGULAR_PAST = frozenset("""
went gone quit quits left took taken came come gave given got gotten made said told ran fell rose grew
sold bought won lost broke broken began begun brought built chose chosen drew drawn drove flew forgot
froze hid hit held kept knew known led let met paid put rang sent set shut spent split spoke stood
stole struck swore threw understood woke wore wrote saw seen sank shook slid sought fought caught
taught thought felt found heard meant became become bore born dealt dug fled flung forgave forbade
hung laid lay lent lit overtook oversaw rode rid sang slept sold sprang stuck stung swam swung tore
undertook upheld withdrew withdrawn wound
""".split())  # noqa: SIM905
# irregular past forms and the verb they inflect, so that "won" is held by "wins" and "bought" by "buys"
_IRREGULAR_BASE = dict(pair.split(":") for pair in """
went:go gone:go came:come left:leave took:take taken:take gave:give given:give got:get made:make said:say
told:tell ran:run fell:fall rose:rise grew:grow sold:sell bought:buy won:win lost:lose broke:break
broken:break began:begin begun:begin brought:bring built:build chose:choose drew:draw drove:drive
flew:fly held:hold kept:keep knew:know led:lead met:meet paid:pay spent:spend sent:send stood:stand
struck:strike saw:see seen:see sank:sink slid:slide fought:fight caught:catch sought:seek thought:think
felt:feel found:find fled:flee hung:hang laid:lay lent:lend wrote:write withdrew:withdraw
withdrawn:withdraw overtook:overtake oversaw:oversee threw:throw shook:shake
""".split())  # noqa: SIM905
# the people a clause can report about: a clause that names one reports what happened to them, whatever
# its tense ("the finance chief quits", "the finance chief's exit"): every word of it must be the analysis
# vocabulary's or the evidence's, and the analysis words that also say a person came or went ("the
# finance chief left") must be the evidence's
PEOPLE_TERMS = frozenset("""
ceo cfo coo cto chairman chairwoman chief executive executives founder founders president board
directors director officer officers boss cofounder
""".split())  # noqa: SIM905
COMINGS_AND_GOINGS = frozenset("""
left leave leaves leaving went gone quit quits quitting stepped walked exited departed
""".split())  # noqa: SIM905
_CLOSED = (FUNCTION_WORDS | ANALYSIS_WORDS | frozenset(k.replace(" ", "_") for k in STANCE_VOCABULARY)
           | frozenset(w for k in STANCE_VOCABULARY for w in k.split() if w not in IDIOM_EVENT_WORDS) | NEGATIONS | HEDGES | FACT_TERMS | READING_TERMS
           | ACTOR_TERMS | PEOPLE_TERMS | UP_WORDS | DOWN_WORDS | _NOT_NAMES)
_OPEN_WORD_RE = re.compile(r"[a-z][a-z']*[a-z]|[a-z]*\d[a-z\d]*[a-z][a-z\d]*|[a-z]+\d[a-z\d]*")
_CLAUSE_RE = re.compile(r"[.;:!?,()\[\]]+|\s[-\u2013\u2014]\s|\b(?:and|but|while|whereas|which|who|so)\b")
_CODE_OK_RE = re.compile(r"(?:q[1-4]|h[12]|fy\d{2,4}|\d+(?:st|nd|rd|th|s|d|m|y|k|bn|mn|bp|bps|x|pm|am))")


def held(word: str, pool: frozenset[str] | set[str]) -> bool:
    """Whether `pool` (words and their stems) holds `word`: as is, by stem, by the stem of a form
    that ends in "e" ("closed" is held by "close", "moves" by "move"), by another form of the same
    word (`_forms`: "won" by "wins", "losing" by "loses", "fuelled" by "fuel"), or by a word an analyst
    writes for the event it names (`SAME_EVENT_WORDS`: "payout" by "dividend", "hired" by "names new")."""
    s = stem(word)
    return word in pool or s in pool or (s != word[:6] and s + "e" in pool) or not pool.isdisjoint(_forms(word)) or (
        s in _SAME_EVENT and _same_event_held(s, pool))


# an analyst's usual word for an event or party the evidence names more specifically (what `held` and
# `invented_facts` accept): a paraphrase in the usual words is a reading, not an invention. One way only
# (the evidence's "dividend" holds the thesis's "payout", not the reverse: "settles over a payout" holds
# no dividend), and a phrase only as adjacent words of one text ("cut jobs", not "jobs" and "cut" apart).
# thesis word(s) -> what the evidence must write
SAME_EVENT_WORDS: dict[str, tuple[str, ...]] = {
    "payout payouts": ("dividend", "dividends"),
    "client clients": ("customer", "customers"),
    "hire hires hired appoint appoints appointed appointment": (
        "names new", "named new", "appoints", "appointed", "hires", "hired"),
    "layoffs layoff": ("layoffs", "redundancies", "job cuts", "cut jobs", "cuts jobs", "cutting jobs", "jobs cut",
                       "eliminate jobs", "eliminates jobs"),
}


def _same_event() -> tuple[dict[str, tuple[str, ...]], frozenset[tuple[str, str]]]:
    """stem of a thesis word -> the pool keys that hold it (a word's stem, or "a_b" for an adjacent
    phrase), and the phrases as pairs of stems (what `_pool_of` adds as keys)."""
    out: dict[str, tuple[str, ...]] = {}
    pairs: set[tuple[str, str]] = set()
    for words, members in SAME_EVENT_WORDS.items():
        keys = []
        for m in members:
            parts = tuple(stem(w) for w in m.split())
            keys.append("_".join(parts))
            if len(parts) == 2:
                pairs.add((parts[0], parts[1]))
        out.update((stem(w), tuple(keys)) for w in words.split())
    return out, frozenset(pairs)


_SAME_EVENT, _SAME_EVENT_PAIRS = _same_event()


def _phrase_keys(words: list[str]) -> frozenset[str]:
    """The "a_b" keys of the SAME_EVENT phrases that `words` (a text's words, in order) write."""
    stems = [stem(w) for w in words]
    return frozenset(f"{a}_{b}" for a, b in zip(stems, stems[1:], strict=False) if (a, b) in _SAME_EVENT_PAIRS)


@lru_cache(maxsize=1 << 14)
def _phrase_keys_of(text: str) -> frozenset[str]:
    """`_phrase_keys` of a text's words, memoised per text (evidence texts repeat across opinions)."""
    return _phrase_keys(fact_words(text))


def _same_event_held(s: str, pool: frozenset[str] | set[str]) -> bool:
    """Whether `pool` (an evidence pool with its phrase keys) holds what the thesis word of stem `s` names."""
    return any(k in pool for k in _SAME_EVENT.get(s, ()))


@lru_cache(maxsize=1 << 16)
def _forms(word: str) -> frozenset[str]:
    """Other forms of `word` and their stems: its verb if it is an irregular past, and its base with
    an -ing, -ed, -es, -s, -ies or -ied ending off (with an "e" or "y" back, a doubled consonant
    single); never a function word ("quits" is not "quite")."""
    out = set()
    base = _IRREGULAR_BASE.get(word)
    if base is not None:
        out.add(base)
    for suffix in ("ing", "ied", "ies", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            b = word[: -len(suffix)]
            out.update((b + "y",) if suffix in ("ied", "ies") else (b, b + "e"))
            if b[-1] == b[-2] and b[-1] not in "aeiousl":
                out.add(b[:-1])
            if b.endswith("ll"):
                out.add(b[:-1])
            break
    out |= {stem(w) for w in out}
    return frozenset(out - FUNCTION_WORDS - {word})


def word_pool(texts: Iterable[str]) -> frozenset[str]:
    """The words of `texts` and their stems (what `held` looks a word up in)."""
    out: set[str] = set()
    for t in texts:
        out.update(_pool_of(t))
    return frozenset(out)


@lru_cache(maxsize=1 << 14)
def _pool_of(text: str) -> frozenset[str]:
    words = fact_words(text) if isinstance(text, str) else []
    return frozenset(words) | frozenset(map(stem, words)) | frozenset(f for w in words for f in _forms(w)) | (
        _phrase_keys(words))


# a joined phrase ("booking_profits") holds no stem: its first six letters ("bookin") would hold other
# words ("bookings", "lowered" from "lowered_guidance") that the phrase's words alone do not
_CLOSED_POOL = frozenset(_CLOSED) | frozenset(stem(w) for w in _CLOSED if "_" not in w)


# a past-tense move or stance verb is analysis vocabulary, yet its clause reports what happened as much
# as any other ("the stock fell after a warehouse fire", "margins eroded after a walkout"): the clause's
# other words must be held too (not the adjectives: "overvalued", "overpriced")
_REPORT_PAST = frozenset(w for w in (_SINGLE_STANCE | UP_WORDS | DOWN_WORDS) if w in _IRREGULAR_PAST or (
    len(w) >= 5 and w.endswith("ed"))) - frozenset(["exceed", "overextended", "overhyped", "overpriced",
                                                    "overstretched", "overvalued", "undervalued"]) | frozenset(
    # analysis words that report a company's or an analyst's act as much ("management reaffirmed its venture
    # with ...", "guided investors to ...", "stuck to its roadmap for ..."); not "unchanged", which reports none
    ["reaffirmed", "guided", "stuck"])
_DIGIT_RE = re.compile(r"\d")
_CODE_RE = re.compile(r"[a-z]\d|\d[a-z]")


_WORD_EDGES = ",.;:!?()[]{}\"-/"


@lru_cache(maxsize=1 << 15)
def _words(low: str) -> tuple[str, ...]:
    """The words of a lower-cased text, split at white space and common punctuation (C-level str ops)."""
    for ch in _WORD_EDGES:
        if ch in low:
            low = low.replace(ch, " ")
    return tuple(low.split())


@lru_cache(maxsize=1 << 16)
def _unheld_event(word: str) -> bool:
    """Whether `word` reads as a past-tense verb ("quit", "recalled") that the analysis vocabulary
    does not hold, or a past-tense move or stance verb (`_REPORT_PAST`): a clause with one reports an
    event; memoised per word (a closed pool)."""
    return word in _REPORT_PAST or (
        (word in _IRREGULAR_PAST or (len(word) >= 5 and word.endswith("ed"))) and not held(word, _CLOSED_POOL))


@lru_cache(maxsize=1 << 16)
def _open_word(word: str) -> bool:
    """Whether `word`, in a clause that reports an event, is outside the analysis vocabulary (not a
    short word, nor an -ly adverb); memoised per word."""
    return len(word) > 2 and not (word.endswith("ly") and len(word) > 4) and not held(word, _CLOSED_POOL)


@lru_cache(maxsize=1 << 15)
def open_words(text: str) -> tuple[str, ...]:
    """The words of `text` (lower-cased) that the analysis vocabulary does not hold, in the clauses
    that report what happened, and product codes ("x2") in any clause (see above)."""
    low = text.lower()
    if "wall street" in low:  # the Street: "wall" is no analysis word ("walled off")
        low = low.replace("wall street", "street")
    # quick test first: most texts hold no past-tense verb outside the vocabulary, no product code and
    # no person
    split = _words(low)
    if (_DIGIT_RE.search(low) is None or _CODE_RE.search(low) is None) and not any(map(_unheld_event, split)) and (
            PEOPLE_TERMS.isdisjoint(split) and ("'s" not in low or PEOPLE_TERMS.isdisjoint(w[:-2] for w in split))):
        return ()
    out: list[str] = []
    for clause in _CLAUSE_RE.split(low):
        words = [w[:-2] if w.endswith("'s") else w for w in _OPEN_WORD_RE.findall(clause.replace("-", " "))]
        # a clause reports an event when it holds a past-tense verb outside the analysis vocabulary or
        # names a person (whatever its tense: "quits", "the chief's exit")
        people = not PEOPLE_TERMS.isdisjoint(words)
        factual = people or any(map(_unheld_event, words))
        digits = _DIGIT_RE.search(clause) is not None
        if not (factual or digits):
            continue
        for w in words:
            if digits and _DIGIT_RE.search(w) is not None:
                if not _CODE_OK_RE.fullmatch(w):
                    out.append(w)
            elif factual and _open_word(w):
                out.append(w)
            elif people and w in COMINGS_AND_GOINGS:
                out.append(w)  # a person's coming or going must be the evidence's ("left" too)
    return tuple(dict.fromkeys(out))


# --- figures in words -----------------------------------------------------------------------------------------
# "revenue moved forty-five percent" states a figure as much as "45%" does: `spelled_figures` writes
# such figures in digits so that the quantity check (`thesis.scan_quantities`) reads them. A spelled
# number is a figure when it is 10 or more or a unit or scale follows it ("five percent", "three
# billion"); "one of the items" and "two sections" count nothing.
_UNIT_WORDS = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
               "sixteen seventeen eighteen nineteen")
_UNITS = {w: i for i, w in enumerate(_UNIT_WORDS.split())}
_TENS = {w: 10 * i for i, w in enumerate("_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()) if i > 1}  # noqa: SIM905
_SCALES = {"hundred": 100, "thousand": 1_000, "million": 1_000_000, "billion": 1_000_000_000,
           "trillion": 1_000_000_000_000}
_NUMBER_WORD = "|".join(sorted([*_UNITS, *_TENS, *_SCALES, "point", "and", "a"], key=len, reverse=True))
_SPELLED_RE = re.compile(rf"\b(?:{_NUMBER_WORD})(?:[\s-]+(?:{_NUMBER_WORD}))*\b", re.I)
_FIGURE_UNIT_RE = re.compile(r"\s*(?:%|percent|per cent|pct|percentage points?|points?|basis points?|bps|dollars?"
                             r"|cents?|times|x\b|fold)", re.I)
_NUMBER_WORDS = frozenset([*_UNITS, *_TENS, *_SCALES]) - {"zero"}


def _spelled_value(words: list[str]) -> tuple[float, int] | None:
    """(value, decimals) of a run of number words ("forty five", "three point two"), or None."""
    total = current = 0.0
    decimals = ""
    seen = False
    in_decimals = False
    for w in words:
        if w in ("and", "a"):
            continue
        if w == "point":
            in_decimals = True
            continue
        if in_decimals and w in _SCALES:  # "three point two billion"
            current, decimals, in_decimals = current + float("0." + (decimals or "0")), "", False
        if in_decimals:
            if w not in _UNITS or _UNITS[w] > 9:
                return None
            decimals += str(_UNITS[w])
            continue
        if w in _UNITS:
            current += _UNITS[w]
        elif w in _TENS:
            current += _TENS[w]
        elif w == "hundred":
            current = (current or 1) * 100
        elif w in _SCALES:
            total += (current or 1) * _SCALES[w]
            current = 0.0
        else:
            return None
        seen = True
    if not seen:
        return None
    value = total + current
    return (value + (float("0." + decimals) if decimals else 0.0), len(decimals))


@lru_cache(maxsize=1 << 14)
def spelled_figures(text: str) -> str | None:
    """`text` with its figures in words written in digits ("forty-five percent" -> "45 percent"), or
    None when it spells none (see above)."""
    if not isinstance(text, str):
        return None
    if _NUMBER_WORDS.isdisjoint(_words(text.lower())):
        return None  # a set test first: most texts spell no number
    out: list[str] = []
    pos = 0
    changed = False
    for m in _SPELLED_RE.finditer(text):
        words = [w for w in re.split(r"[\s-]+", m.group(0).lower()) if w]
        while words and words[-1] in ("and", "a", "point"):
            words.pop()
        parsed = _spelled_value(words)
        if parsed is None:
            continue
        value, decimals = parsed
        if all(w in _SCALES for w in words) and text[: m.start()].rstrip()[-1:].isdigit():
            continue  # "$15 billion": the scale of a figure in digits, which the quantity check reads
        unit = _FIGURE_UNIT_RE.match(text, m.end()) is not None
        if value < 10 and not unit and not any(w in _SCALES for w in words):
            continue
        out.append(text[pos : m.start()])
        out.append(f"{value:.{decimals}f}" if decimals else f"{value:.0f}")
        pos = m.end() - (len(m.group(0)) - len(m.group(0).rstrip()))
        changed = True
    if not changed:
        return None
    out.append(text[pos:])
    return "".join(out)
