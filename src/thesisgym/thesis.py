"""One parser for the canonical thesis format (docs/spec.md, section 5), shared by every stage.

A completion is parsed once into frozen dataclasses (`Thesis` -> `Section` -> `Bullet`) and
every reward, filter and report reads those, so "what counts as a quote/citation/decision" is
decided here and nowhere else. The parser is tolerant about spelling (whitespace, tag and label
casing, curly quotes, "Strong Buy") and strict about what counts (one decision, last tag, outside
<think>; unknown labels are invalid; unknown tags are reported). It never raises and does linear
work on a capped prefix of the input, because it runs on raw model samples inside GRPO.

`extract_numbers` is also used by the context builder to fill `EvidenceItem.numbers`, so the
claim side and the evidence side agree on what a number is.
"""

from __future__ import annotations

import functools
import re
import string
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

from thesisgym.schema import LABELS, SECTIONS

__all__ = [
    "MAX_PARSE_CHARS",
    "Bullet",
    "Quantity",
    "Section",
    "Thesis",
    "clear_parser_caches",
    "completion_text",
    "extract_numbers",
    "normalize_label",
    "normalize_text",
    "on_parser_error",
    "parse_bullet",
    "parse_thesis",
    "scan_numbers",
    "scan_quantities",
    "slot_setters",
    "split_think",
]

# Work caps: a policy can emit megabytes of garbage; we look at a bounded prefix and say so.
MAX_PARSE_CHARS = 200_000
MAX_NUMBER_SCAN_CHARS = 200_000
MAX_BULLET_CHARS = 4_000

BLOCK_TAGS = frozenset(SECTIONS) | {"conclusion", "decision", "think"}

# --- numbers ------------------------------------------------------------------------------------
# One linear regex: optional sign, optional currency, digits with thousands separators or plain,
# optional decimals, optional scale word/suffix (kept out of the value: "1.2B" -> 1.2). The
# look-behind stops "Q3", "SMA50" and the "-05" of "2024-05-01" from being read as numbers.
_NUMBER_RE = re.compile(
    r"(?<![\w.])(?P<sign>[-+\u2212])?(?:[$\u20ac\u00a3\u00a5]\s?)?"
    r"(?P<int>\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.(?P<dec>\d+))?(?!\d)"
)


def scan_numbers(text: str, *, max_chars: int = MAX_NUMBER_SCAN_CHARS) -> list[tuple[float, int]]:
    """Every number in `text` as (value, decimals shown); the decimals drive rounding tolerance."""
    if not isinstance(text, str) or not text:
        return []
    out: list[tuple[float, int]] = []
    # findall yields (sign, int, dec) tuples, "" for an absent group: no Match objects (hot path)
    for sign, whole, dec in _NUMBER_RE.findall(text, 0, min(len(text), max_chars)):
        if "," in whole:
            whole = whole.replace(",", "")
        value = float(whole + "." + dec) if dec else float(whole)
        if sign == "-" or sign == "\u2212":
            value = -value
        out.append((value, len(dec)))
    return out


def extract_numbers(text: str) -> list[float]:
    """Numbers in `text`: "12.4%" -> 12.4, "$1,234.5" -> 1234.5, "-3.2" -> -3.2, "1.2B" -> 1.2.

    Scale words and units are not applied (the evidence and the claim use the same words, so raw
    values compare). Scans at most MAX_NUMBER_SCAN_CHARS characters; never raises.
    """
    return [v for v, _ in scan_numbers(text)]


# --- quantities: numbers with direction, unit and scale -----------------------------------------
# A claim's number is verified against the evidence as a *quantity*, not a bare value: "fell 0.65%"
# is not "+0.65%", "$1.2 million" is not "$1.2 billion", "12 bp" is not "12%". The rules:
# - direction: an explicit sign, else a direction word among the three words before the number
#   ("rose", "down", "fell to", ...; back to the previous number at most) or the word right after
#   it ("3% lower", "15% rise"); 0 when none is found.
# - unit: "%" (also "percent", "pct"), "bp" (also "bps", "basis points"), "x" (multiples) or "".
# - scale: thousand/k, million/m/mn, billion/b/bn, trillion/t/tn -> 1e3, 1e6, 1e9, 1e12; else 1.
# - currency: the symbol in front ($, EUR, GBP, JPY signs) or "".
_QUANTITY_RE = re.compile(
    r"(?<![\w.])(?P<sign>[-+\u2212])?(?P<cur>[$\u20ac\u00a3\u00a5])?\s?"
    r"(?P<int>\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.(?P<dec>\d+))?(?!\d)"
    r"(?:\s?(?P<unit>%|percent\b|pct\b|bps\b|bp\b|basis points?\b|x\b"
    r"|thousand\b|k\b|million\b|mn\b|m\b|billion\b|bn\b|b\b|trillion\b|tn\b|t\b))?",
    re.I,
)
_UNIT_OF = {"%": "%", "percent": "%", "pct": "%", "bps": "bp", "bp": "bp", "basis point": "bp",
            "basis points": "bp", "x": "x"}
_SCALE_OF = {"thousand": 1e3, "k": 1e3, "million": 1e6, "mn": 1e6, "m": 1e6, "billion": 1e9, "bn": 1e9,
             "b": 1e9, "trillion": 1e12, "tn": 1e12, "t": 1e12}
UP_WORDS = frozenset(
    ["up", "rose", "rise", "rises", "rising", "gained", "gain", "gains", "added", "adds", "increased", "increase", "increases", "grew", "grow", "grows", "higher", "jump", "jumped", "jumps", "surge", "surged", "surges", "climb", "climbed", "climbs", "soar", "soared", "soars", "advance", "advanced", "advances", "rally", "rallied", "rallies", "plus"]
)
DOWN_WORDS = frozenset(
    ["down", "fell", "fall", "falls", "falling", "lost", "lose", "loses", "declined", "decline", "declines", "decreased", "decrease", "decreases", "dropped", "drop", "drops", "lower", "slid", "slides", "slipped", "slips", "shrank", "shrinks", "plunge", "plunged", "plunges", "sink", "sank", "sinks", "tumble", "tumbled", "tumbles", "slip", "slide", "shrink", "slump", "slumped", "slumps", "minus"]
)
_DIR_WORD_RE = re.compile(r"[a-z]+")
_PAST_MOVES = frozenset(w for w in UP_WORDS | DOWN_WORDS if w.endswith("ed") or w in (
    "rose", "grew", "fell", "lost", "slid", "shrank", "sank"))


@dataclass(frozen=True, slots=True)
class Quantity:
    """A number as a claim: value (magnitude), decimals shown, direction (-1, 0, +1), unit, scale, currency."""

    value: float
    decimals: int
    direction: int
    unit: str
    scale: float
    currency: str
    hint: int = 0  # the direction a past-tense verb right after the number gives what it measures (-1, 0, +1)

    def matches(self, other: Quantity, rel_tol: float = 0.001) -> bool:
        """Whether this claim is backed by `other` (an evidence quantity).

        Same unit, scale and (when the claim shows one) currency; a claim's direction must equal the
        evidence's (a claim without a direction matches either). Magnitudes agree within `rel_tol`
        relative, or the evidence rounded to the decimals the claim shows equals it ("12%" for 12.4%).
        A claim's `hint` may not contradict the evidence's direction ("shares 1.6% advanced" is no
        reading of "change -1.60%") but needs none ("EPS of $1.26 fell short" reads "EPS $1.26"); an
        evidence number's hint is its direction here ("fell to $1.26" reads "EPS of $1.26 fell short").
        """
        if self.unit != other.unit or self.scale != other.scale:
            return False
        if self.currency and self.currency != other.currency:
            return False
        moved = other.direction or other.hint
        if self.direction and self.direction != moved:
            return False
        if self.hint and moved and self.hint != moved:
            return False
        x, y = self.value, other.value
        return abs(x - y) <= rel_tol * max(x, y) or abs(round(y, self.decimals) - x) < 1e-9


def _direction(text: str, start: int, end: int, floor: int) -> tuple[int, int]:
    """(direction, hint) of the number at text[start:end]; words before it are read back to `floor`
    (the end of the previous number), so "fell 2% to $1.2 billion" does not make the $1.2 billion fall.
    A noun or adjective right after it is its direction too ("15% rise", "3% lower"); a past-tense verb
    there has the number for its subject ("EPS of $1.26 fell short", "a 40% margin rose to 42%"): the
    thing moved, not the number, so it is only a hint (`Quantity.matches`)."""
    before: list[str] = _DIR_WORD_RE.findall(text[max(floor, start - 40) : start].lower())[-3:]
    for word in reversed(before):
        if word in UP_WORDS:
            return 1, 0
        if word in DOWN_WORDS:
            return -1, 0
    after = _DIR_WORD_RE.match(text[end : end + 16].lower().lstrip())
    if after is not None:
        word = after.group(0)
        sign = 1 if word in UP_WORDS else -1 if word in DOWN_WORDS else 0
        return (0, sign) if word in _PAST_MOVES else (sign, 0)
    return 0, 0


def scan_quantities(text: str, *, max_chars: int = MAX_NUMBER_SCAN_CHARS) -> list[Quantity]:
    """Every number in `text` as a `Quantity` (see the rules above); never raises."""
    if not isinstance(text, str) or not text:
        return []
    out: list[Quantity] = []
    floor = 0
    for m in _QUANTITY_RE.finditer(text, 0, min(len(text), max_chars)):
        sign, cur, whole, dec, unit = m.group("sign", "cur", "int", "dec", "unit")
        whole = whole.replace(",", "")
        value = float(whole + "." + dec) if dec else float(whole)
        direction, hint = ((1 if sign == "+" else -1), 0) if sign else _direction(text, m.start(), m.end(), floor)
        floor = m.end()
        u = (unit or "").lower()
        out.append(Quantity(value, len(dec or ""), direction, _UNIT_OF.get(u, ""), _SCALE_OF.get(u, 1.0), cur or "",
                            hint))
    return out


# --- text normalisation -------------------------------------------------------------------------
_QUOTE_TRANSLATION = str.maketrans(
    {
        "\u201c": '"',
        "\u201d": '"',
        "\u201e": '"',
        "\u201f": '"',
        "\u00ab": '"',
        "\u00bb": '"',
        "\u2033": '"',
        "\uff02": '"',
        "\u2018": "'",
        "\u2019": "'",
        "\u201a": "'",
        "\u201b": "'",
        "\u2032": "'",
        "\u2013": "-",
        "\u2014": "-",
        "\u2212": "-",
        "\u00a0": " ",
    }
)
_WS_RE = re.compile(r"\s+")
# invisible characters a policy can sprinkle into a quote or a repeated bullet: removed everywhere
ZERO_WIDTH = "\u200b\u200c\u200d\u2060\ufeff\u00ad\u180e"
_ZERO_WIDTH_DELETE = str.maketrans(dict.fromkeys(ZERO_WIDTH))


def normalize_text(text: str) -> str:
    """Case-, whitespace- and quote-insensitive form used to compare quotes with evidence.

    The documented normalisation: typographic quotes and dashes -> ASCII, Unicode NFKC, zero-width
    characters and soft hyphens removed, whitespace runs -> one space, lower case, stripped.
    """
    if not isinstance(text, str):
        return ""
    if not text.isascii():
        text = unicodedata.normalize("NFKC", text.translate(_QUOTE_TRANSLATION).translate(_ZERO_WIDTH_DELETE))
    if (
        "  " in text
        or "\n" in text
        or "\t" in text
        or "\r" in text
        or "\x0b" in text
        or "\x0c" in text
        or not text.isascii()
    ):
        text = _WS_RE.sub(" ", text)
    return text.strip().lower()


_LABEL_SEP_RE = re.compile(r"[\s\-_]+")
_LABEL_STRIP = " \t\r\n*_`'\".:;!()[]{}"


def normalize_label(raw: str) -> str:
    """ "Strong Buy" / "strong-buy" / "**STRONG_BUY**" -> "STRONG_BUY"; unknown strings come back upper-cased."""
    if not isinstance(raw, str):
        return ""
    return _LABEL_SEP_RE.sub("_", raw.strip(_LABEL_STRIP).upper()).strip("_")


# --- completions ----------------------------------------------------------------------------------
def completion_text(completion: Any) -> str:
    """The text of a TRL completion: a plain str or `[{"role": "assistant", "content": ...}]`.

    Conversational completions join the assistant contents (content may itself be a list of
    `{"type": "text", "text": ...}` parts). Anything else returns "" (scored as an empty thesis).
    """
    if isinstance(completion, str):
        return completion
    if isinstance(completion, dict):
        completion = [completion]
    if not isinstance(completion, (list, tuple)):
        return ""
    parts: list[str] = []
    for message in completion:
        if not isinstance(message, dict):
            continue
        if message.get("role", "assistant") != "assistant":
            continue
        content = message.get("content")
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts.extend(
                p.get("text", "") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)
            )
    return "\n".join(parts)


# --- dataclasses ----------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Bullet:
    """One "opinion -> quote -> source" bullet.

    text:       the bullet as written (marker removed, whitespace collapsed)
    opinion:    text with quotes and citations removed: the analyst's own words (a [...] group that
                is not a citation stays in it, as text: "[revenue up 40%]" is a claim, not a reference)
    quotes:     quoted strings (straight or curly double quotes), in order
    citations:  cited evidence ids, upper-cased, in order, without duplicates
    numbers:    numbers in the opinion (outside quotes and citations) as (value, decimals shown)
    word_count: words in the opinion (quotes excluded, so copy-pasting evidence is not "writing")
    """

    text: str
    opinion: str
    quotes: tuple[str, ...]
    citations: tuple[str, ...]
    numbers: tuple[tuple[float, int], ...]
    word_count: int


@dataclass(frozen=True, slots=True)
class Section:
    """A section tag (one of schema.SECTIONS) and its bullets; `prose` = words written outside bullets."""

    name: str
    bullets: tuple[Bullet, ...]
    prose: str = ""


@dataclass(frozen=True, slots=True)
class Thesis:
    """A parsed completion. `decision` is set only when it is valid (see `errors` otherwise).

    `outside` is the text written outside every block (before, between and after the tags,
    <think> excluded), whitespace-collapsed: the thesis asserts it too."""

    sections: tuple[Section, ...]
    conclusion: str | None
    decision: str | None
    decisions: tuple[str, ...]
    think: str | None
    errors: tuple[str, ...]
    warnings: tuple[str, ...]
    unknown_tags: tuple[str, ...]
    raw_length: int
    truncated: bool = False
    decision_in_think: tuple[str, ...] = field(default=())
    outside: str = ""

    @property
    def section_names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.sections)

    @property
    def bullets(self) -> tuple[Bullet, ...]:
        return tuple(b for s in self.sections for b in s.bullets)

    @property
    def valid(self) -> bool:
        """True when the decision is valid and no structural error was found."""
        return not self.errors and self.decision is not None


# --- parsing ----------------------------------------------------------------------------------------
_TAG_RE = re.compile(r"<([^<>\n]{1,48})>")
_TAG_INNER_RE = re.compile(r"\s*(/?)\s*([A-Za-z][A-Za-z0-9_\- ]{0,40}?)\s*/?\s*")
_BULLET_SPLIT_RE = re.compile(r"\n[ \t]*(?:[-*\u2022\u2023\u25e6\u2043\u2219]|\d{1,2}[.)])[ \t]+")
_NESTED_DECISION_RE = re.compile(r"(.{0,60}?)<\s*/\s*decision\s*>", re.S | re.I)
_PIECE_RE = re.compile(r'"([^"\n]{1,2000})"|\[([^\[\]\n]{1,300})\]')
_CITE_GROUP_RE = re.compile(r"\s*[A-Za-z]{1,3}\s?\d{1,4}(?:\s*[,;/&]\s*[A-Za-z]{1,3}\s?\d{1,4})*\s*")
_CITE_ID_RE = re.compile(r"([A-Za-z]{1,3})\s?(\d{1,4})")
_DIGIT_RE = re.compile(r"\d")
_PUNCT_TOKEN_RE = re.compile(r" [^\w\s$]+(?= |$)")  # on " " + opinion: "->", "-", ":" alone are not words


# memoised with lru_cache: each is a pure function of its (short) string argument, which repeats across
# bullets and generations; bounded because junk brackets can be endless


@functools.lru_cache(maxsize=1 << 16)
def _tag(inner: str) -> tuple[bool, str] | None:
    """(closing, normalised name) of the inside of <...>, or None when it is not a tag."""
    m = _TAG_INNER_RE.fullmatch(inner)
    return (m.group(1) == "/", _LABEL_SEP_RE.sub("_", m.group(2).strip().lower())) if m else None


@functools.lru_cache(maxsize=1 << 16)
def _cite_ids(group: str) -> tuple[str, ...]:
    """Ids in the inside of one [...] group; () when it is not a citation ("[see above]", "[1]")."""
    if not _CITE_GROUP_RE.fullmatch(group):
        return ()
    return tuple(f"{prefix.upper()}{int(num)}" for prefix, num in _CITE_ID_RE.findall(group))


@functools.lru_cache(maxsize=4096)
def _citations(groups: tuple[str, ...]) -> tuple[str, ...]:
    """Cited ids of a bullet's [...] groups, in order, without duplicates (a bullet's citations repeat
    across bullets and generations: "[T1][T2]...[M4]")."""
    return tuple(dict.fromkeys(cid for group in groups for cid in _cite_ids(group)))


def clear_parser_caches() -> None:
    """Forget the memoised tags and citations (`thesisgym.rewards.base.clear_caches` calls this)."""
    for fn in (_tag, _cite_ids, _citations):
        fn.cache_clear()


def parse_bullet(text: str) -> Bullet:
    """Split one bullet's text into opinion, quotes, citations and claim numbers.

    One left-to-right pass finds quotes and [...] groups, so a citation inside a quote is part of
    the quote. The opinion is the text without quotes and without citation groups; a [...] group
    that cites nothing ("[revenue up 40%]", "[T1: the CEO resigned]") is the analyst's text and
    stays in the opinion, where its numbers and facts are checked like any other.
    """
    bullets = _parse_bullets([text])
    return bullets[0] if bullets else Bullet("", "", (), (), (), 0)


def slot_setters(cls: type, names: tuple[str, ...]) -> tuple[Callable[[Any, Any], None], ...]:
    """The slot setters of a frozen slotted dataclass, by field name, in the order of `names`.

    Hot paths build such objects with `object.__new__` + these setters instead of the generated
    `__init__` (a frozen dataclass sets every field through object.__setattr__, ~2x slower): the
    very same object (equality, hash and repr; no __post_init__). Bound by name, so reordering the
    fields cannot swap two values; `names` must be exactly the fields, or this raises at import.
    """
    declared = tuple(f.name for f in fields(cls))
    if sorted(names) != sorted(declared):
        raise TypeError(f"{cls.__name__}: setters for {names} but the fields are {declared}")
    return tuple(cls.__dict__[name].__set__ for name in names)


_new_object = object.__new__
_set_text, _set_opinion, _set_quotes, _set_citations, _set_numbers, _set_word_count = slot_setters(
    Bullet, ("text", "opinion", "quotes", "citations", "numbers", "word_count")
)


# ASCII letters and spaces: deleting them from an opinion (bytes.translate, a C loop) leaves the
# digits and punctuation; most opinions have none, and then no number or punctuation regex runs
_LETTERS_AND_SPACE = (string.ascii_letters + " ").encode()
_DIGITS_UNDERSCORE_DOLLAR = (string.digits + "_$").encode()
_ASCII_DIGIT_BYTES_RE = re.compile(rb"[0-9]")


def _one_quote_one_group(text: str) -> tuple[tuple[str, str, str], str, str, int] | None:
    """For a one-line bullet with exactly two double quotes, one "[" and one "]", as `"quote" [ID]`
    or `[ID] "quote"` (lengths within _PIECE_RE's bounds): (the three texts around them, the quote,
    the group, the index of the text the group follows), which is what _PIECE_RE.split finds
    there. None for any other shape (a C-level str.find instead of the regex scan: most bullets
    have this shape)."""
    if text.count('"') != 2 or text.count("[") != 1 or text.count("]") != 1:
        return None
    q1 = text.find('"')
    q2 = text.find('"', q1 + 1)
    b1 = text.find("[")
    b2 = text.find("]")
    if not (0 < q2 - q1 - 1 <= 2000 and 0 < b2 - b1 - 1 <= 300):
        return None
    if q2 < b1:
        return (text[:q1], text[q2 + 1 : b1], text[b2 + 1 :]), text[q1 + 1 : q2], text[b1 + 1 : b2], 1
    if b2 < q1:
        return (text[:b1], text[b2 + 1 : q1], text[q2 + 1 :]), text[q1 + 1 : q2], text[b1 + 1 : b2], 0
    return None


def _opinion_words(texts: list[str] | tuple[str, ...], groups: list[str | None]) -> list[str]:
    """The opinion's words: the texts between quotes and groups, with each group that cites nothing
    kept as text where it stood (each quote and citation stands for one space, as a substitution
    would)."""
    parts: list[str] = []
    for k, piece in enumerate(texts):
        parts.append(piece)
        group = groups[k] if k < len(groups) else None
        if group and not _cite_ids(group):
            parts.append(group)
    return " ".join(parts).split()


def _parse_bullets(chunks: list[str]) -> tuple[Bullet, ...]:
    """parse_bullet for the chunks of one section (hot path: ~20 bullets per completion).

    Per bullet, one `_PIECE_RE.split` yields the opinion pieces, quotes and [...] groups together
    ([text, quote, group, text, quote, group, ..., text]): no substitution pass, no Match objects.
    """
    split = _PIECE_RE.split
    bullets: list[Bullet] = []
    for text in chunks:
        if len(text) > MAX_BULLET_CHARS:
            text = text[:MAX_BULLET_CHARS]
        if not text.isascii():  # unicode spaces and line breaks (NEL, U+2028) become plain spaces too
            text = _WS_RE.sub(" ", text.translate(_QUOTE_TRANSLATION))
        text = text.strip()
        if not text:
            continue
        if "  " in text or "\n" in text or "\t" in text or "\r" in text or "\x0b" in text or "\x0c" in text:
            text = _WS_RE.sub(" ", text)
        if '"' not in text and "[" not in text:
            quotes: tuple[str, ...] = ()
            citations: tuple[str, ...] = ()
            words = text.split()
        else:
            outside = _one_quote_one_group(text)
            if outside is not None:
                # the usual bullet: exactly what `split` gives for it, found with str.find
                opinion_parts, quote, group, after = outside
                quote = quote.strip()
                quotes = (quote,) if quote else ()
                citations = _cite_ids(group)
                if len(citations) > 1:  # "[T1, T1]": in order, without duplicates
                    citations = _citations((group,))
                if citations:
                    words = " ".join(opinion_parts).split()
                else:  # "[...]" that cites nothing is the analyst's text
                    words = _opinion_words(opinion_parts, [None, group] if after else [group])
            else:
                # quotes and [...] groups never span a newline, and a bullet is one line by now;
                # an alternative that did not match is None (a matched one is never empty)
                pieces = split(text)
                quotes = tuple(filter(None, map(str.strip, filter(None, pieces[1::3]))))
                all_groups = pieces[2::3]
                groups = tuple(filter(None, all_groups))
                citations = _citations(groups) if groups else ()
                if all(map(_cite_ids, groups)):  # every group cites: one space each, as a substitution
                    words = " ".join(pieces[0::3]).split()
                else:  # "[...]" that cites nothing is the analyst's text
                    words = _opinion_words(pieces[0::3], all_groups)
        opinion = " ".join(words)
        n_words = len(words)
        numbers: tuple[tuple[float, int], ...] = ()
        # both regexes below find nothing in an opinion of letters and spaces only: skip them then
        if opinion.isascii():
            rest = opinion.encode("ascii").translate(None, _LETTERS_AND_SPACE)
            if rest:
                if _ASCII_DIGIT_BYTES_RE.search(rest) is not None:
                    numbers = tuple(scan_numbers(opinion))
                if rest.translate(None, _DIGITS_UNDERSCORE_DOLLAR):
                    n_words -= len(_PUNCT_TOKEN_RE.findall(" " + opinion))
        else:
            if _DIGIT_RE.search(opinion) is not None:
                numbers = tuple(scan_numbers(opinion))
            n_words -= len(_PUNCT_TOKEN_RE.findall(" " + opinion))
        # Bullet(...) through the slot setters above (this runs for every bullet of every completion)
        bullet = _new_object(Bullet)
        _set_text(bullet, text)
        _set_opinion(bullet, opinion)
        _set_quotes(bullet, quotes)
        _set_citations(bullet, citations)
        _set_numbers(bullet, numbers)
        _set_word_count(bullet, n_words)
        bullets.append(bullet)
    return tuple(bullets)


def _split_bullets(body: str) -> tuple[tuple[Bullet, ...], str]:
    """Bullets start with a marker at the beginning of a line; other lines continue the previous one."""
    chunks = _BULLET_SPLIT_RE.split("\n" + body)
    prose = " ".join(chunks[0].split())  # text before the first bullet
    return _parse_bullets(chunks[1:]), prose


_THINK_TAG_RE = re.compile(r"<\s*(/?)\s*think\s*>", re.I)
_THINK_DECISION_RE = re.compile(r"<\s*decision\s*>(.{0,60}?)<\s*/\s*decision\s*>", re.I | re.S)


def _split_think(text: str) -> tuple[str, str | None, list[str]]:
    """Remove <think> blocks (any casing/spacing), an unclosed one and an R1-style leading "...</think>"."""
    if "think" not in text and "THINK" not in text and "Think" not in text:
        return text, None, []
    marks = [(m.start(), m.end(), m.group(1) == "/") for m in _THINK_TAG_RE.finditer(text)]
    if not marks:
        return text, None, []
    notes: list[str] = []
    think_parts: list[str] = []
    out: list[str] = []
    pos = 0
    i = 0
    if marks[0][2]:  # text starts inside a think block whose opening tag was in the prompt
        think_parts.append(text[: marks[0][0]])
        pos = marks[0][1]
        i = 1
    while i < len(marks):
        start, end, closing = marks[i]
        if closing:  # stray </think>: drop the tag, keep the text around it
            out.append(text[pos:start])
            pos = end
            i += 1
            continue
        out.append(text[pos:start])
        j = i + 1
        while j < len(marks) and not marks[j][2]:
            j += 1  # nested or repeated <think> inside thinking
        if j == len(marks):
            think_parts.append(text[end:])
            notes.append("unclosed <think>: everything after it is treated as thinking")
            pos = len(text)
            break
        think_parts.append(text[end : marks[j][0]])
        pos = marks[j][1]
        i = j + 1
    out.append(text[pos:])
    think = "\n".join(p.strip() for p in think_parts) if think_parts else None
    return " ".join(out), think, notes


def _quote_marks(text: str) -> int:
    return text.count('"') + text.count("\u201c") + text.count("\u201d")


def _inside_quotes(body: str, start: int, end: int) -> bool:
    """Whether body[start:end] sits inside a quotation: quote marks pair left to right within a
    line, so an odd number of them before it on its line, and one more after it on that line."""
    line_start = body.rfind("\n", 0, start) + 1
    if line_start == start or not _quote_marks(body[line_start:start]) % 2:  # most tags open a line
        return False
    line_end = body.find("\n", end)
    return _quote_marks(body[end : line_end if line_end != -1 else len(body)]) > 0


_parser_error_handlers: list[Callable[[str, BaseException], None]] = []


def on_parser_error(handler: Callable[[str, BaseException], None]) -> None:
    """Call `handler("parse_thesis", exc)` whenever the parser fails on a completion.

    `thesisgym.rewards` registers its counted error path here (`rewards.base.record_error`), so a
    parser bug is counted and logged like any verifier error, and re-raised in strict mode,
    instead of posing as an empty thesis."""
    if handler not in _parser_error_handlers:
        _parser_error_handlers.append(handler)


def split_think(text: str) -> tuple[str, str | None]:
    """(the completion without its <think> blocks, the thinking or None): the parser's own rule."""
    body, think, _ = _split_think(text if isinstance(text, str) else "")
    return body, think


def parse_thesis(text: Any) -> Thesis:
    """Parse a completion (str or TRL conversational list) into a `Thesis`; never raises (outside
    strict mode: a failure goes to the handlers of `on_parser_error`, which may re-raise)."""
    try:
        return _parse(text if isinstance(text, str) else completion_text(text))
    except Exception as exc:  # a parser bug must not kill training, nor hide: counted by the handlers
        for handler in _parser_error_handlers:
            handler("parse_thesis", exc)
        return Thesis((), None, None, (), None, (f"parser failure: {type(exc).__name__}",), (), (), 0)


_Tag = tuple[int, int, bool, str]  # (start, end, closing, normalised name)


def _structural_tags(body: str) -> list[_Tag]:
    """The tags of `body` outside quotations: a headline quoting "<decision>SELL</decision>" neither
    adds a decision nor hides the real one."""
    tags: list[_Tag] = []
    quoted = '"' in body or "\u201c" in body or "\u201d" in body
    for m in _TAG_RE.finditer(body):
        tag = _tag(m.group(1))
        if tag is not None and not (quoted and _inside_quotes(body, m.start(), m.end())):
            tags.append((m.start(), m.end(), tag[0], tag[1]))
    return tags


def _next_closing(tags: list[_Tag]) -> list[int]:
    """For each tag index, the index of the next closing tag of the same name (one backward pass, so
    matching blocks stays linear even with thousands of unclosed tags); len(tags) when none."""
    next_close: list[int] = [len(tags)] * len(tags)
    pending: dict[str, int] = {}
    for k in range(len(tags) - 1, -1, -1):
        name_k = tags[k][3]
        next_close[k] = pending.get(name_k, len(tags))
        if tags[k][2]:
            pending[name_k] = k
    return next_close


class _Walk:
    """What one pass over the blocks of a completion collects (a plain slotted class: one per
    completion on the hot path)."""

    __slots__ = ("block_order", "conclusion", "decision_pos", "decisions", "last_block_end", "sections", "spans",
                 "unknown")

    def __init__(self) -> None:
        self.sections: list[Section] = []
        self.conclusion: str | None = None
        self.decisions: list[str] = []
        self.decision_pos: list[int] = []
        self.block_order: list[str] = []
        self.unknown: dict[str, None] = {}
        self.spans: list[tuple[int, int]] = []  # (start, end) of each block
        self.last_block_end = -1


def _add_block(walk: _Walk, name: str, content: str, seen: set[str], warnings: list[str]) -> None:
    walk.block_order.append(name)
    if name == "decision":
        walk.decisions.append(normalize_label(content))
        walk.decision_pos.append(len(walk.block_order) - 1)
    elif name == "conclusion":
        if walk.conclusion is not None:
            warnings.append("more than one <conclusion>; the first is used")
        else:
            walk.conclusion = " ".join(content.split())  # = _WS_RE.sub(" ", content).strip(): \s is isspace()
    elif name in SECTIONS:
        if name in seen:
            warnings.append(f"duplicate <{name}> section; the first is used")
        else:
            seen.add(name)
            bullets, prose = _split_bullets(content)
            if prose:
                warnings.append(f"<{name}> has text outside bullets")
            walk.sections.append(Section(name=name, bullets=bullets, prose=prose))


def _walk_blocks(body: str, tags: list[_Tag], errors: list[str], warnings: list[str]) -> _Walk:
    """One pass over the tags: sections, conclusion, decisions, unknown tags and the block spans."""
    next_close = _next_closing(tags)
    walk = _Walk()
    seen_sections: set[str] = set()
    i = 0
    while i < len(tags):
        start, end, closing, name = tags[i]
        if name not in BLOCK_TAGS:
            walk.unknown.setdefault(name)
            i += 1
            continue
        if closing:
            warnings.append(f"stray closing tag </{name}>")
            i += 1
            continue
        j = next_close[i]
        if j == len(tags):
            errors.append(f"unclosed <{name}>")
            content, close_end = body[end:], len(body)
        else:
            content, close_end = body[end : tags[j][0]], tags[j][1]
        _add_block(walk, name, content, seen_sections, warnings)
        walk.last_block_end = close_end
        walk.spans.append((start, close_end))
        # the block's inner tags belong to it, but a <decision> inside a section (typically an
        # unclosed one) is still a decision: count it so a second decision cannot hide in there
        if name != "decision":
            for t in tags[i + 1 : j]:
                if t[3] == "decision" and not t[2]:
                    m = _NESTED_DECISION_RE.match(body, t[1])
                    walk.decisions.append(normalize_label(m.group(1)) if m else "")
                    walk.block_order.append("decision")
                    walk.decision_pos.append(len(walk.block_order) - 1)
                    errors.append(f"<decision> nested inside <{name}>")
        i = j + 1
    return walk


def _outside_text(body: str, spans: list[tuple[int, int]]) -> str:
    """The text of `body` outside every block span, whitespace-collapsed (spans are in order)."""
    if not spans:
        return " ".join(body.split())
    pieces = []
    pos = 0
    for start, end in spans:
        if start > pos and not body[pos:start].isspace():
            pieces.append(body[pos:start])
        pos = max(pos, end)
    if pos < len(body) and not body[pos:].isspace():
        pieces.append(body[pos:])
    return " ".join(" ".join(pieces).split()) if pieces else ""


def _final_decision(walk: _Walk, errors: list[str]) -> str | None:
    """The one valid decision, or None with the reason in `errors`."""
    if not walk.decisions:
        errors.append("missing <decision>")
    elif len(walk.decisions) > 1:
        errors.append(f"{len(walk.decisions)} <decision> tags; exactly one is required")
    else:
        label = walk.decisions[0]
        if label not in LABELS:
            errors.append(f"invalid decision {label!r}; expected one of {', '.join(LABELS)}")
        elif walk.decision_pos[0] != len(walk.block_order) - 1:
            errors.append("<decision> is not the last tag")
        else:
            return label
    return None


def _parse(text: str) -> Thesis:
    raw_length = len(text)
    errors: list[str] = []
    warnings: list[str] = []
    truncated = raw_length > MAX_PARSE_CHARS
    if truncated:
        text = text[:MAX_PARSE_CHARS]
        warnings.append(f"completion truncated to {MAX_PARSE_CHARS} of {raw_length} characters")
    body, think, notes = _split_think(text)
    warnings.extend(notes)
    think_decisions: tuple[str, ...] = ()
    if think and "<" in think:
        think_decisions = tuple(normalize_label(m.group(1)) for m in _THINK_DECISION_RE.finditer(think))
        if think_decisions:
            warnings.append("decision tag inside <think> ignored")
    walk = _walk_blocks(body, _structural_tags(body), errors, warnings)
    decision = _final_decision(walk, errors)
    if walk.unknown:
        warnings.append("unknown tags: " + ", ".join(list(walk.unknown)[:10]))
    if walk.last_block_end != -1 and body[walk.last_block_end :].strip() and decision is not None:
        warnings.append("text after the last tag")
    return Thesis(
        sections=tuple(walk.sections),
        conclusion=walk.conclusion,
        decision=decision,
        decisions=tuple(walk.decisions),
        think=think,
        errors=tuple(errors),
        warnings=tuple(warnings),
        unknown_tags=tuple(walk.unknown),
        raw_length=raw_length,
        truncated=truncated,
        decision_in_think=think_decisions,
        outside=_outside_text(body, walk.spans),
    )
