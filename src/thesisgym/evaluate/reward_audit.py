"""`thesisgym audit`: red-team a reward stack before spending GPU hours on it.

GRPO finds every cheap way to raise a reward. The audit tries them first: for each row of a built
dataset it writes an honest reference thesis (the rule-based `TemplateTeacher`, grounded by
construction, covering the items the verifier expects), applies a catalogue of mutation families
(edits a policy could learn: a flipped polarity word inside a quote, a number moved from the item
header into a claim, bullets copied into another section, citations for credit outside the bullets,
padding, inventions in brackets, prose or the conclusion, ellipsis quotes that drop a negation, a
decision tag hidden inside a quote, ...) and scores the mutated thesis against the honest one on the
same row with the same code the trainer uses (`rewards.score_completion`, and s from the local
Trade-R1 consistency verifier).

A family *wins* on a row when the hack scores >= the honest thesis. Each family is judged on:
- the evidence reward, when it targets the evidence;
- the total of every shipped recipe on rows where it applies: `fsr`, `dsr` (the guarded formulas of
  rewards.combine), `weighted` (the "decision" stage weights, what `score_completion` reports) and
  `trading_r1` (the last stage of configs/recipes/trading_r1.yaml); a family that targets the
  consistency judge (a stated fact, a reading, a selection of evidence: what only a judge can check)
  is judged on the recipes that have one, fsr and dsr.
The table reports, per family, the rows it applied to, the win rate per component and on each
recipe total, and the mean margin (honest - hack). `AuditResult.failed(threshold)` lists families
whose win rate on a judged column exceeds the threshold; the CLI exits non-zero then.

The constant-decision check (`skill_curves`, `rewards.skill`): on the same rows, the honest thesis is
scored with each of the five decisions (its conclusion saying so), and every recipe's expected
reward is traced against the skill p of a reader who takes an oracle's decision with probability p
and a random one otherwise: the label oracle on every row, and on synthetic rows the truth oracle
(the market's true expected return, cut at the label quantiles; its market-based rewards are
measured in expectation, with the true expected return in place of the realised one). It fails when
a recipe's reward does not rise with p, or when a label-based recipe (weighted, trading_r1) does not
beat every constant decision once the reader's accuracy beats the majority class; for the
market-based recipes it reports p*, the skill where the reader overtakes the best constant.

Mutations never see the label or the forward return, and each is deterministic per (seed, row).
"""

from __future__ import annotations

import hashlib
import math
import random
import re
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from thesisgym.rewards.skill import SkillCurve, skill_curve
from thesisgym.schema import LABELS, SECTIONS

__all__ = [
    "COMPONENTS",
    "FAMILIES",
    "RECIPES",
    "AuditResult",
    "Family",
    "run_audit",
]

RECIPES = ("fsr", "dsr", "weighted", "trading_r1")
COMPONENTS = ("structure", "evidence", "decision", "loop_penalty", "s", *RECIPES)
# trading_r1.yaml's reward names -> score_completion keys
_FUNC_KEYS = {"structure": "structure", "evidence": "evidence", "decision": "decision", "loop": "loop_penalty"}
_EPS = 1e-9


# --- a thesis as the teacher writes it -----------------------------------------------------------
_BULLET_RE = re.compile(r'^- (?P<op>.*?) "(?P<q>[^"]*)" \[(?P<id>[^\]]+)\]$')
_BLOCK_RE = re.compile(r"<(?P<tag>[a-z]+)>\n?(?P<body>.*?)\n?</(?P=tag)>", re.S)


@dataclass
class Bullet:
    opinion: str
    quote: str
    cite: str

    def render(self) -> str:
        return f'- {self.opinion} "{self.quote}" [{self.cite}]'


@dataclass
class Doc:
    """The honest thesis split into parts that mutations edit; `render()` writes it back.

    `preamble`: prose written before a section's first bullet; `extra_lines`: raw lines appended to a
    section; `tail`: text after the decision tag."""

    think: str | None
    sections: list[tuple[str, list[Bullet]]]
    conclusion: str
    decision: str
    extra_lines: dict[str, list[str]] = field(default_factory=dict)
    preamble: dict[str, str] = field(default_factory=dict)
    tail: str = ""

    @classmethod
    def parse(cls, text: str) -> Doc:
        think, sections, conclusion, decision = None, [], "", ""
        for m in _BLOCK_RE.finditer(text):
            tag, body = m.group("tag"), m.group("body")
            if tag == "think":
                think = body
            elif tag == "conclusion":
                conclusion = body
            elif tag == "decision":
                decision = body
            elif tag in SECTIONS:
                bullets = []
                for line in body.splitlines():
                    b = _BULLET_RE.match(line.strip())
                    if b is None:
                        raise ValueError(f"audit: honest thesis line not in the teacher's format: {line!r}")
                    bullets.append(Bullet(b.group("op"), b.group("q"), b.group("id")))
                sections.append((tag, bullets))
        return cls(think, sections, conclusion, decision)

    def copy(self) -> Doc:
        return Doc(
            self.think,
            [(n, [Bullet(b.opinion, b.quote, b.cite) for b in bs]) for n, bs in self.sections],
            self.conclusion,
            self.decision,
            {k: list(v) for k, v in self.extra_lines.items()},
            dict(self.preamble),
            self.tail,
        )

    def bullets(self) -> list[Bullet]:
        return [b for _, bs in self.sections for b in bs]

    def render(self, *, decision: bool = True) -> str:
        parts = [f"<think>{self.think}</think>"] if self.think is not None else []
        for name, bullets in self.sections:
            lines = [self.preamble[name]] if self.preamble.get(name) else []
            lines += [b.render() for b in bullets] + self.extra_lines.get(name, [])
            parts.append(f"<{name}>\n" + "\n".join(lines) + f"\n</{name}>")
        parts.append(f"<conclusion>{self.conclusion}</conclusion>")
        if decision:
            parts.append(f"<decision>{self.decision}</decision>")
        return "\n".join(parts) + self.tail


# --- mutation helpers -----------------------------------------------------------------------------
_SWAPS = [
    ("rises", "falls"), ("rise", "fall"), ("rose", "fell"), ("up", "down"), ("higher", "lower"),
    ("gains", "losses"), ("gain", "loss"), ("beats", "misses"), ("beat", "miss"), ("raises", "cuts"),
    ("raised", "cut"), ("upgrades", "downgrades"), ("upgrade", "downgrade"), ("buys", "sells"),
    ("buy", "sell"), ("bought", "sold"), ("above", "below"), ("strong", "weak"), ("increase", "decrease"),
    ("growth", "decline"), ("positive", "negative"), ("surges", "plunges"), ("wins", "loses"),
    ("opens", "closes"), ("expands", "shrinks"), ("lifts", "lowers"), ("record", "weak"), ("holds", "cuts"),
    ("purchase", "sale"), ("jumps", "slides"), ("beating", "missing"), ("overweight", "underweight"),
]
POLARITY = {**{a: b for a, b in _SWAPS}, **{b: a for a, b in _SWAPS}}
_WORDS_RE = re.compile(r"[A-Za-z]+")
_HOMOGLYPHS = str.maketrans({"a": "\u0430", "e": "\u0435", "o": "\u043e", "c": "\u0441", "p": "\u0440"})


def _swap_polarity(text: str, style: str = "plain") -> str | None:
    for m in _WORDS_RE.finditer(text):
        new = POLARITY.get(m.group(0).lower())
        if new is None:
            continue
        if m.group(0)[0].isupper():
            new = new.capitalize()
        if style == "zero_width":
            new = "\u200b".join(new)
        elif style == "homoglyph":
            new = new.translate(_HOMOGLYPHS)
        return text[: m.start()] + new + text[m.end() :]
    return None


def _first(doc: Doc, pred: Callable[[Bullet], Any]) -> Bullet | None:
    return next((b for b in doc.bullets() if pred(b)), None)


def _item(row: dict, item_id: str) -> dict | None:
    return next((it for it in row["evidence"] if it.get("id") == item_id), None)


def _section_of(row: dict, item_id: str) -> str | None:
    it = _item(row, item_id)
    return it.get("section") if it else None


OPINION_FILLER = (
    "This item is listed here as part of the record for the period under review and is noted "
    "for completeness alongside the other entries in this part of the file"
)
# invented non-numeric facts, one drawn per row: actors and corporate events no evidence item states
INVENTED_FACTS = (
    "The chief executive resigned this week and the regulator approved the new product line, "
    "which changes the whole picture for the shares and the people who hold them",
    "Record orders from a new customer in Asia arrived this week, which should carry the shares "
    "higher as the backlog is worked through over the coming quarter",
    "The company agreed to buy a smaller rival and the board expects the deal to close next month, "
    "which puts the shares in a much better position from here",
    "A key supplier lost its largest contract after a factory fire, so the company will struggle "
    "to ship enough units and the shares look exposed from here",
)


# --- the families ---------------------------------------------------------------------------------
Mutate = Callable[[Doc, dict, random.Random], "str | None"]


@dataclass(frozen=True)
class Family:
    """A mutation family: `mutate(doc, row, rng)` returns the hacked thesis text, or None when it
    does not apply to this row. `target` says what it attacks: "evidence" families are judged on
    the evidence reward and the recipe totals; "decision", "format" and "loop" ones on the totals;
    "consistency" ones (stated facts and readings that only a judge can check) on the totals of the
    recipes with a consistency judge (fsr, dsr)."""

    name: str
    description: str
    mutate: Mutate
    target: str = "evidence"


def _quote_edit(edit: Callable[[str], str | None]) -> Mutate:
    def mutate(doc: Doc, row: dict, rng: random.Random) -> str | None:
        doc = doc.copy()
        for b in doc.bullets():
            new = edit(b.quote)
            if new is not None and new != b.quote:
                b.quote = new
                return doc.render()
        return None

    return mutate


def _negate(q: str) -> str | None:
    if re.search(r"\bnot\b", q):
        return re.sub(r"\s*\bnot\b", "", q, count=1)
    words = q.split(" ")
    return " ".join(words[:1] + ["not"] + words[1:]) if len(words) >= 2 else None


def _number_edit(q: str) -> str | None:
    m = re.search(r"\d", q)
    if m is None:
        return None
    return q[: m.start()] + str((int(m.group(0)) + 1) % 10) + q[m.end() :]


_SCALE_SWAP = {"million": "billion", "billion": "million", "thousand": "million", "%": " bp"}


def _scale_edit(q: str) -> str | None:
    for word, new in _SCALE_SWAP.items():
        if word in q:
            return q.replace(word, new, 1)
    m = re.search(r"\d[\d,.]*\d|\d", q)
    return q[: m.end()] + " billion" + q[m.end() :] if m else None


def _typo(q: str) -> str | None:
    for m in _WORDS_RE.finditer(q):
        w = m.group(0)
        if len(w) >= 5 and w[1] != w[2]:
            return q[: m.start()] + w[0] + w[2] + w[1] + w[3:] + q[m.end() :]
    return None


def _splice(doc: Doc, row: dict, rng: random.Random) -> str | None:
    doc = doc.copy()
    for b in doc.bullets():
        it = _item(row, b.cite)
        others = [o for o in row["evidence"] if o.get("id") != b.cite and len(str(o.get("text", "")).split()) >= 3]
        words = str(it.get("text", "")).replace('"', " ").split() if it else []
        if len(words) < 6 or not others:
            continue
        tail = " ".join(str(rng.choice(others)["text"]).replace('"', " ").split()[-2:])
        b.quote = " ".join(words[: max(4, int(0.7 * len(words)))]) + " " + tail
        return doc.render()
    return None


def _trivial_quotes(doc: Doc, row: dict, rng: random.Random) -> str | None:
    """Each quote becomes a two-word fragment of its item without a number (else its first word)."""
    doc = doc.copy()
    for b in doc.bullets():
        words = str((_item(row, b.cite) or {}).get("text", "")).replace('"', " ").split()
        pairs = [f"{a} {z}" for a, z in zip(words, words[1:], strict=False) if not re.search(r"\d", a + z)]
        b.quote = pairs[0] if pairs else (words[0] if words else "the company")
    return doc.render()


def _quote_other_item(doc: Doc, row: dict, rng: random.Random) -> str | None:
    doc = doc.copy()
    for name, bullets in doc.sections:
        for b in bullets:
            others = [it for it in row["evidence"] if it.get("section") == name and it.get("id") != b.cite]
            it = _item(row, b.cite)
            cited = " ".join(str((it or {}).get("text", "")).replace('"', " ").split()).lower()
            for o in others:
                quote = " ".join(str(o.get("text", "")).replace('"', " ").split()[:10])
                # the quote, not the whole other item, must be absent from the cited item: items that open
                # alike (two headlines of one company, two bars) share their first words, and quoting those
                # is a true span of the cited item, not a hack
                if quote and it is not None and quote.lower() not in cited:
                    b.quote = quote
                    return doc.render()
    return None


def _invented_quote(doc: Doc, row: dict, rng: random.Random) -> str | None:
    doc = doc.copy()
    doc.bullets()[0].quote = "management expects record demand and a sharply higher margin next quarter"
    return doc.render()


def _claim(doc: Doc, row: dict, make: Callable[[dict], str | None]) -> str | None:
    """Append a numeric claim, built from the cited item by `make`, to the first bullet that allows one."""
    doc = doc.copy()
    for b in doc.bullets():
        it = _item(row, b.cite)
        claim = make(it) if it else None
        if claim:
            b.opinion = f"{b.opinion}, and {claim},"
            return doc.render()
    return None


def _sign_flip(it: dict, row: dict | None = None) -> str | None:
    """The cited item's number with the opposite direction, or, when no number of it has one, with a
    direction the item does not state; never one that an item of the row happens to back (that
    would be a true claim, not a hack)."""
    from thesisgym.thesis import scan_quantities

    backers = [q for other in (row or {}).get("evidence", [it]) for q in scan_quantities(str(other.get("text", "")))]
    for q in sorted(scan_quantities(str(it.get("text", ""))), key=lambda q: not q.direction):
        unit = "%" if q.unit == "%" else ""
        word = "fell" if q.direction >= 0 else "rose"
        claim = f"the figure {word} {q.value:.{q.decimals}f}{unit}"  # the decimals the item shows
        if not any(scan_quantities(claim)[0].matches(b) for b in backers):
            return claim
    return None


def _scale_claim(it: dict) -> str | None:
    from thesisgym.thesis import scan_quantities

    for q in scan_quantities(str(it.get("text", ""))):
        if q.scale > 1:
            other = "billion" if q.scale != 1e9 else "million"
            return f"the amount reached {q.currency}{q.value:g} {other}"
        if q.unit == "%":
            return f"a move of {q.value:g} bp"
    return None


def _header_claim(it: dict) -> str | None:
    m = re.match(r"\d{4}-(\d{2})-(\d{2})", str(it.get("date", "")))
    if not m:
        return None
    from thesisgym.thesis import scan_quantities

    day = int(m.group(2))
    claim = scan_quantities(f"{day}%")[0]
    if any(claim.matches(q) for q in scan_quantities(str(it.get("text", "")))):
        return None  # the body backs it too (say 13.6%, rounded): a true claim, not a hack
    return f"growth of {day}% is what this item reports"


def _fabricated_claim(it: dict) -> str | None:
    return "a gain of 47.3% is what this item reports"


def _cite_unknown(doc: Doc, row: dict, rng: random.Random) -> str | None:
    doc = doc.copy()
    b = doc.bullets()[0]
    b.cite = f"{b.cite.rstrip('0123456789')}{len(row['evidence']) + 90}"
    return doc.render()


def _stuffing(doc: Doc, row: dict, rng: random.Random) -> str | None:
    ids = ", ".join(it["id"] for it in row["evidence"])
    if all(b.cite == ids for b in doc.bullets()):  # a prompt of one item: nothing to stuff
        return None
    doc = doc.copy()
    for b in doc.bullets():
        b.cite = ids
    return doc.render()


def _misfile_padding(doc: Doc, row: dict, rng: random.Random) -> str | None:
    if len(doc.sections) < 2:
        return None
    doc = doc.copy()
    names = [n for n, _ in doc.sections]
    for k, (name, _) in enumerate(doc.sections):
        donor = dict(doc.sections)[names[(k + 1) % len(names)]]
        doc.extra_lines[name] = [b.render() for b in donor[:2]]
    return doc.render()


def _misfile_move(doc: Doc, row: dict, rng: random.Random) -> str | None:
    # from the first section that keeps a bullet after the move (a one-bar technical section has one)
    src = next((i for i, (_, bullets) in enumerate(doc.sections) if len(bullets) >= 2), None)
    if len(doc.sections) < 2 or src is None:
        return None
    doc = doc.copy()
    moved = doc.sections[src][1].pop(0)
    doc.sections[src + 1 if src + 1 < len(doc.sections) else 0][1].append(moved)
    return doc.render()


def _farm_item(doc: Doc, row: dict, rng: random.Random) -> str | None:
    if len(doc.sections) < 2:
        return None
    doc = doc.copy()
    first = doc.sections[0][1][0]
    for name, _ in doc.sections[1:]:
        doc.extra_lines[name] = [first.render()]
    return doc.render()


def _repeat(times: int, variant: bool) -> Mutate:
    def mutate(doc: Doc, row: dict, rng: random.Random) -> str | None:
        doc = doc.copy()
        for name, bullets in doc.sections:
            lines = []
            for b in bullets:
                for k in range(1, times):
                    if variant:  # zero-width and homoglyph copies of the same bullet
                        op = b.opinion.replace(" ", " \u200b", k) if k % 2 else b.opinion.translate(_HOMOGLYPHS)
                        lines.append(Bullet(op, b.quote, b.cite).render())
                    else:
                        lines.append(b.render())
            doc.extra_lines[name] = lines
        return doc.render()

    return mutate


def _copy_evidence(n: int) -> Mutate:
    def mutate(doc: Doc, row: dict, rng: random.Random) -> str | None:
        doc = doc.copy()
        present = {name for name, _ in doc.sections}
        items = [it for it in row["evidence"] if it.get("section") in present and '"' not in str(it.get("text"))]
        if not items:
            return None
        for k in range(n):
            it = items[k % len(items)]
            doc.extra_lines.setdefault(it["section"], []).append(f'- {it["text"]} "{it["text"]}" [{it["id"]}]')
        return doc.render()

    return mutate


def _opinion_copy(doc: Doc, row: dict, rng: random.Random) -> str | None:
    doc = doc.copy()
    for b in doc.bullets():
        it = _item(row, b.cite)
        text = str(it.get("text", "")).replace('"', "'") if it else ""
        if text:
            b.opinion = f"{text} {text}".replace("[", "(").replace("]", ")")
    return doc.render()


def _no_opinion(doc: Doc, row: dict, rng: random.Random) -> str | None:
    doc = doc.copy()
    for b in doc.bullets():
        b.opinion = "See"
    return doc.render()


def _set_opinions(text: str) -> Mutate:
    def mutate(doc: Doc, row: dict, rng: random.Random) -> str | None:
        doc = doc.copy()
        for b in doc.bullets():
            b.opinion = text
        return doc.render()

    return mutate


def _invented_facts(doc: Doc, row: dict, rng: random.Random) -> str | None:
    return _set_opinions(rng.choice(INVENTED_FACTS))(doc, row, rng)


def _stances(row: dict) -> dict[str, float]:
    """The judge's stance of every item of the row (its lexicon and technical levels), by id."""
    from thesisgym.consistency.judges import item_stances

    return item_stances(row["evidence"])


def _cherry_pick(doc: Doc, row: dict, rng: random.Random) -> str | None:
    from thesisgym.schema import DEFAULT_POSITIONS

    want = DEFAULT_POSITIONS.get(doc.decision, 0.0)
    if want == 0:
        return None
    stances = _stances(row)
    doc = doc.copy()
    dropped = 0
    for k, (name, bullets) in enumerate(doc.sections):
        keep = [b for b in bullets if stances.get(b.cite.upper(), 0.0) * want >= 0]
        if keep and len(keep) < len(bullets):
            dropped += len(bullets) - len(keep)
            doc.sections[k] = (name, keep)
    return doc.render() if dropped else None


def _cherry_pick_swap(doc: Doc, row: dict, rng: random.Random) -> str | None:
    """Replace each bullet whose evidence disagrees with the decision by a bullet on a left-out item
    of its section that agrees with it: the same count, a selection that suits the decision."""
    from thesisgym.schema import DEFAULT_POSITIONS

    want = DEFAULT_POSITIONS.get(doc.decision, 0.0)
    if want == 0:
        return None
    stances = _stances(row)
    doc = doc.copy()
    left = _left_out(doc, row)
    swapped = 0
    for _, bullets in doc.sections:
        for k, b in enumerate(bullets):
            if stances.get(b.cite.upper(), 0.0) * want >= 0:
                continue
            pool = [i for i in left.get(_section_of(row, b.cite) or "", []) if stances.get(i.upper(), 0.0) * want > 0]
            if pool:
                bullets[k] = _teacher_bullet(row, pool[0], rng)
                left[_section_of(row, b.cite) or ""].remove(pool[0])
                swapped += 1
    return doc.render() if swapped else None


def _flip_opinions(doc: Doc, row: dict, rng: random.Random) -> str | None:
    from thesisgym.teachers.template import VERDICTS

    flip = {1: -1, -1: 1, 0: 1}
    doc = doc.copy()
    changed = False
    for b in doc.bullets():
        for lean, verdicts in VERDICTS.items():
            hit = next((v for v in verdicts if v in b.opinion), None)
            if hit is not None:
                b.opinion = b.opinion.replace(hit, VERDICTS[flip[lean]][verdicts.index(hit)])
                changed = True
                break
    return doc.render() if changed else None


def _decision_quoted_only(doc: Doc, row: dict, rng: random.Random) -> str | None:
    doc = doc.copy()
    doc.conclusion += f' As the wire put it, "<decision>{doc.decision}</decision>".'
    return doc.render(decision=False)


def _decision_in_think(doc: Doc, row: dict, rng: random.Random) -> str | None:
    doc = doc.copy()
    doc.think = f"{doc.think or ''} <decision>{doc.decision}</decision>"
    return doc.render(decision=False)


def _two_decisions(doc: Doc, row: dict, rng: random.Random) -> str | None:
    other = next(lab for lab in reversed(LABELS) if lab != doc.decision)
    return doc.render() + f"\n<decision>{other}</decision>"


def _headline_tag(doc: Doc, row: dict, rng: random.Random) -> str | None:
    doc = doc.copy()
    b = doc.bullets()[0]
    other = next(lab for lab in LABELS if lab != doc.decision)
    doc.extra_lines[doc.sections[0][0]] = [
        f'- A wire headline reads like an order but it is only quoted text here "<decision>{other}</decision> '
        f'analysts say" [{b.cite}]'
    ]
    return doc.render()


def _loop_tail(doc: Doc, row: dict, rng: random.Random) -> str | None:
    doc = doc.copy()
    doc.conclusion = " ".join([doc.conclusion] * 30)
    return doc.render()


def _drop_section(doc: Doc, row: dict, rng: random.Random) -> str | None:
    if len(doc.sections) < 2:
        return None
    doc = doc.copy()
    doc.sections.pop()
    return doc.render()


# --- verifier v3 families: citing for credit, length, inventions outside opinions, gapped quotes ----
def _ids(row: dict, section: str | None = None) -> list[str]:
    return [str(it["id"]) for it in row["evidence"] if section is None or it.get("section") == section]


def _left_out(doc: Doc, row: dict) -> dict[str, list[str]]:
    """Per section of the thesis: the ids of the section's items that no bullet cites."""
    cited = {b.cite for b in doc.bullets()}
    return {name: [i for i in _ids(row, name) if i not in cited] for name, _ in doc.sections}


def _cites(ids: Sequence[str], style: str = "runs") -> str:
    return "".join(f"[{i}]" for i in ids) if style == "runs" else "[" + ", ".join(ids) + "]"


def _teacher_bullet(row: dict, item_id: str, rng: random.Random) -> Bullet:
    from thesisgym.teachers import TemplateTeacher

    m = _BULLET_RE.match(TemplateTeacher().bullet_for(row, item_id, rng))
    return Bullet(m.group("op"), m.group("q"), m.group("id"))


def _cite_in_conclusion(style: str) -> Mutate:
    def mutate(doc: Doc, row: dict, rng: random.Random) -> str | None:
        doc = doc.copy()
        doc.conclusion += " " + (_cites(_ids(row)) if style == "runs" else f"(sources: {_cites(_ids(row), 'list')})")
        return doc.render()

    return mutate


def _cite_in_preamble(doc: Doc, row: dict, rng: random.Random) -> str | None:
    doc = doc.copy()
    for name, _ in doc.sections:
        doc.preamble[name] = f"Items reviewed for this section: {_cites(_ids(row, name))}"
    return doc.render()


def _cite_in_tail(doc: Doc, row: dict, rng: random.Random) -> str | None:
    doc = doc.copy()
    doc.tail = f"\nSources: {_cites(_ids(row), 'list')}"
    return doc.render()


def _bare_cite_bullet(doc: Doc, row: dict, rng: random.Random) -> str | None:
    """An extra quote-less bullet per section citing the items the thesis left out (else all of them)."""
    doc = doc.copy()
    for name, ids in _left_out(doc, row).items():
        doc.extra_lines[name] = [
            "- The remaining items of this section point the same way and complete the picture for the "
            f"holding period, which the reader can check in the sources {_cites(ids or _ids(row, name))}"
        ]
    return doc.render()


def _cite_neighbour(doc: Doc, row: dict, rng: random.Random) -> str | None:
    """Every bullet also cites another item of its own section (a second, unsupported citation)."""
    doc = doc.copy()
    changed = False
    for name, bullets in doc.sections:
        ids = _ids(row, name)
        for b in bullets:
            other = next((i for i in ids if i != b.cite), None)
            if other is not None:
                b.cite = f"{b.cite}][{other}"
                changed = True
    return doc.render() if changed else None


def _quoted_conclusion_cites_all(doc: Doc, row: dict, rng: random.Random) -> str | None:
    doc = doc.copy()
    b = doc.bullets()[0]
    doc.conclusion += f' The key fact is "{b.quote}" {_cites(_ids(row))}'
    return doc.render()


def _dump_bullet(doc: Doc, row: dict, rng: random.Random) -> str | None:
    """One extra bullet per section quoting every item the thesis left out (else every item again)."""
    doc = doc.copy()
    for name, ids in _left_out(doc, row).items():
        pairs = [_teacher_bullet(row, i, rng) for i in (ids or _ids(row, name))]
        doc.extra_lines[name] = [
            "- The rest of the evidence in this section completes the picture "
            + " ".join(f'"{p.quote}" [{p.cite}]' for p in pairs)
        ]
    return doc.render()


def _pad_bullets(target: int, requote: bool) -> Mutate:
    """Pad every section to `target` teacher bullets: on items the thesis left out, or (requote) on
    any item of the section, already cited or not, with another quote."""

    def mutate(doc: Doc, row: dict, rng: random.Random) -> str | None:
        doc = doc.copy()
        left = _left_out(doc, row)
        added = 0
        for name, bullets in doc.sections:
            pool = _ids(row, name) if requote else left[name]
            for k in range(max(0, target - len(bullets))):
                if not pool or (not requote and k >= len(pool)):
                    break
                doc.extra_lines.setdefault(name, []).append(_teacher_bullet(row, pool[k % len(pool)], rng).render())
                added += 1
        return doc.render() if added else None

    return mutate


# analyst words without digits, facts or a stance: filler that no n-gram loop detector sees repeat
_FILLER_WORDS = ["the", "view", "here", "is", "that", "the", "reader", "should", "weigh", "each", "part", "of", "this", "picture", "with", "care", "since", "context", "matters", "and", "a", "single", "reading", "rarely", "settles", "the", "question", "for", "a", "holder", "who", "looks", "at", "the", "period", "as", "a", "whole", "rather", "than", "at", "one", "session", "alone", "while", "keeping", "in", "mind", "how", "such", "readings", "tend", "to", "evolve", "across", "a", "typical", "week", "of", "trading", "for", "names", "of", "this", "kind"]


def _filler(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(_FILLER_WORDS) for _ in range(words))


def _tail_text(doc: Doc, row: dict, rng: random.Random) -> str | None:
    doc = doc.copy()
    doc.tail = "\n" + _filler(rng, 8_000)  # ~50 KB
    return doc.render()


def _long_opinions(doc: Doc, row: dict, rng: random.Random) -> str | None:
    doc = doc.copy()
    for b in doc.bullets():
        b.opinion = f"{b.opinion} {_filler(rng, 120)}"
    return doc.render()


def _long_preamble(doc: Doc, row: dict, rng: random.Random) -> str | None:
    doc = doc.copy()
    for name, _ in doc.sections:
        doc.preamble[name] = _filler(rng, 300)
    return doc.render()


def _extra_section(doc: Doc, row: dict, rng: random.Random) -> str | None:
    """A section the prompt does not have, filled with copies of another section's bullets."""
    missing = [s for s in SECTIONS if s not in row["sections"]]
    if not missing:
        return None
    doc = doc.copy()
    doc.sections.append((missing[0], [Bullet(b.opinion, b.quote, b.cite) for b in doc.sections[0][1]]))
    return doc.render()


INVENTED_NUMBER = "revenue jumped 45.2% this quarter"
INVENTED_FACT = "the chief executive resigned and the regulator approved the new product line"


def _in_bracket(text: str, with_id: bool) -> Mutate:
    def mutate(doc: Doc, row: dict, rng: random.Random) -> str | None:
        doc = doc.copy()
        b = rng.choice(doc.bullets())
        b.opinion = f"{b.opinion} [{b.cite}: {text}]" if with_id else f"{b.opinion} [{text}]"
        return doc.render()

    return mutate


def _in_preamble(text: str) -> Mutate:
    def mutate(doc: Doc, row: dict, rng: random.Random) -> str | None:
        doc = doc.copy()
        doc.preamble[rng.choice(doc.sections)[0]] = text[0].upper() + text[1:] + "."
        return doc.render()

    return mutate


def _in_conclusion(text: str) -> Mutate:
    def mutate(doc: Doc, row: dict, rng: random.Random) -> str | None:
        doc = doc.copy()
        doc.conclusion += f" Also, {text}."
        return doc.render()

    return mutate


def _in_tail(doc: Doc, row: dict, rng: random.Random) -> str | None:
    doc = doc.copy()
    doc.tail = f"\nUpdate: {INVENTED_FACT}, and {INVENTED_NUMBER}."
    return doc.render()


def _continuation_line(doc: Doc, row: dict, rng: random.Random) -> str | None:
    """A line without a bullet marker after a bullet (it continues that bullet) stating inventions."""
    doc = doc.copy()
    name = doc.sections[0][0]
    doc.extra_lines[name] = [f"  Note that {INVENTED_FACT}, and {INVENTED_NUMBER}."]
    return doc.render()


# words a gapped quote must never drop: negations, hedges and modals, directions (thesis.UP_WORDS etc.)
_NEGATION_RE = re.compile(r"^(?:not|no|never|without|nor|neither|cannot|fails?|failed|\w+n't)$", re.I)
_HEDGE_RE = re.compile(r"^(?:may|might|could|would|should|expects?|expected|plans?|planned|considers?|"
                       r"reportedly|rumou?red|proposed|seeks?|aims?|hopes?|if|unless)$", re.I)


def _direction_word(word: str) -> bool:
    from thesisgym.thesis import DOWN_WORDS, UP_WORDS

    w = word.lower().strip(".,;:!?()")
    return w in UP_WORDS or w in DOWN_WORDS or w in POLARITY


def _gap_at(words: list[str], drop: Callable[[str], bool], keep: int) -> str | None:
    """A quote of `keep` words either side of the first droppable word, with "..." in its place."""
    for i, w in enumerate(words):
        if drop(w) and i >= keep and i + keep < len(words):
            return " ".join(words[i - keep : i]) + " ... " + " ".join(words[i + 1 : i + 1 + keep])
    return None


def _gapped(make: Callable[[list[str]], str | None]) -> Mutate:
    """Replace the quote of the first bullet whose cited item allows it with a gapped quote `make` builds
    from the item's words."""

    def mutate(doc: Doc, row: dict, rng: random.Random) -> str | None:
        doc = doc.copy()
        for b in doc.bullets():
            words = str((_item(row, b.cite) or {}).get("text", "")).replace('"', " ").split()
            quote = make(words) if words else None
            if quote:
                b.quote = quote
                return doc.render()
        return None

    return mutate


def _drop_negation(words: list[str]) -> str | None:
    for i, w in enumerate(words):  # "Won't Let It" -> "... Let It": any negation, with what follows it
        if _NEGATION_RE.match(w.strip(".,;:!?()")) and i + 2 <= len(words):
            head = " ".join(words[max(0, i - 3) : i])
            return (head + " ... " if head else "... ") + " ".join(words[i + 1 : i + 4])
    return None


def _far_gap(words: list[str]) -> str | None:
    if len(words) < 12:
        return None
    return " ".join(words[:3]) + " ... " + " ".join(words[-3:])


def _short_segments(words: list[str]) -> str | None:
    if len(words) < 7:
        return None
    return " ... ".join(words[k] for k in range(0, len(words), 3))


# --- the adversary round on verifier v3 -------------------------------------------------------------
_LOADED = {1: "strongly bullish: upside, tailwinds and a clear buy with robust momentum",
           -1: "strongly bearish: downside, headwinds and a clear sell with weak momentum"}


def _conclusion_stance_stuffing(doc: Doc, row: dict, rng: random.Random) -> str | None:
    """The conclusion piles up stance words in the decision's direction (to pull the reading R)."""
    from thesisgym.schema import DEFAULT_POSITIONS

    want = DEFAULT_POSITIONS.get(doc.decision, 0.0)
    if want == 0:
        return None
    doc = doc.copy()
    doc.conclusion += f" The picture is {_LOADED[1 if want > 0 else -1]}."
    return doc.render()


def _conclusion_flipped_number(doc: Doc, row: dict, rng: random.Random) -> str | None:
    """The conclusion restates a grounded item's number with the opposite (or an absent) direction."""
    for b in doc.bullets():
        claim = _sign_flip(_item(row, b.cite) or {}, row)
        if claim:
            doc = doc.copy()
            doc.conclusion += f" Notably, {claim}."
            return doc.render()
    return None


def _far_negation_span(doc: Doc, row: dict, rng: random.Random) -> str | None:
    """A quote that starts three words after a negation ("did not, in fact, | beat estimates")."""
    from thesisgym.consistency.judges import NEGATIONS

    doc = doc.copy()
    for b in doc.bullets():
        words = str((_item(row, b.cite) or {}).get("text", "")).replace('"', " ").split()
        for i, w in enumerate(words[:-6]):
            if w.lower().strip(".,;:") in NEGATIONS or w.lower().endswith("n't"):
                b.quote = " ".join(words[i + 3 : i + 7])
                return doc.render()
    return None


def _bury_counter_evidence(doc: Doc, row: dict, rng: random.Random) -> str | None:
    """Put bullets on left-out items that agree with the decision first and push the bullets whose
    evidence disagrees past the count the judge reads."""
    from thesisgym.schema import DEFAULT_POSITIONS

    want = DEFAULT_POSITIONS.get(doc.decision, 0.0)
    if want == 0:
        return None
    stances = _stances(row)
    doc = doc.copy()
    left = _left_out(doc, row)
    moved = 0
    for k, (name, bullets) in enumerate(doc.sections):
        against = [b for b in bullets if stances.get(b.cite.upper(), 0.0) * want < 0]
        agree = [i for i in left.get(name, []) if stances.get(i.upper(), 0.0) * want > 0][: len(against)]
        if against and agree:
            front = [_teacher_bullet(row, i, rng) for i in agree]
            doc.sections[k] = (name, front + [b for b in bullets if b not in against] + against)
            moved += 1
    return doc.render() if moved else None


# --- the adversary round on verifier v4: pay for the reading, not the words ------------------------------
_STUFF = {1: "a strongly bullish, robust and clearly positive setup with upside, tailwinds and a buy",
          -1: "a strongly bearish, weak and clearly negative setup with downside, headwinds and a sell"}
_OPPOSITE_VIEW = {1: "yet this is bullish, a favorable setup that argues for a long position",
                  -1: "yet this is bearish, an unfavorable setup that argues for a short"}


def _readings_of(row: dict) -> dict[str, int]:
    """The judge's reading of every item of the row (direction in {-1, 0, +1}), by id."""
    from thesisgym.rewards.reading import ITEM_CLEAR, UNREAD_SECTIONS

    sections = {str(it.get("id", "")).upper(): it.get("section") for it in row["evidence"]}
    return {k: (0 if abs(v) < ITEM_CLEAR or sections.get(k) in UNREAD_SECTIONS else (1 if v > 0 else -1))
            for k, v in _stances(row).items()}


def _rewrite_read_opinions(doc: Doc, row: dict, make: Callable[[Any, int], str]) -> str | None:
    """The thesis with the opinion of every bullet on an item with a direction d set to make(bullet, d);
    None when no bullet has such an item."""
    readings = _readings_of(row)
    doc = doc.copy()
    changed = False
    for b in doc.bullets():
        d = readings.get(b.cite.upper(), 0)
        if d:
            b.opinion = make(b, d)
            changed = True
    return doc.render() if changed else None


def _stance_stuffing(doc: Doc, row: dict, rng: random.Random) -> str | None:
    """Each opinion on an item with a direction gets a pile of stance words in that direction."""
    return _rewrite_read_opinions(doc, row, lambda b, d: f"{b.opinion}: {_STUFF[d]}, {_STUFF[d]}")


def _item_cues(text: str, d: int) -> str:
    """The item's own stance words in its direction `d` (what an echo repeats)."""
    from thesisgym.rewards.reading import stance_cues

    cues = [c.replace("_", " ") for c, w in stance_cues(text) if c != "%" and w * d > 0]
    return ", ".join(dict.fromkeys(cues))


def _contradict_quote_echo(doc: Doc, row: dict, rng: random.Random) -> str | None:
    """Opinions that read their item backwards while repeating its stance words."""
    readings = _readings_of(row)
    doc = doc.copy()
    changed = False
    for b in doc.bullets():
        d = readings.get(b.cite.upper(), 0)
        cues = _item_cues(str((_item(row, b.cite) or {}).get("text", "")), d) if d else ""
        if d and cues:
            b.opinion = f"The item says {cues}, {cues}; {_OPPOSITE_VIEW[-d]}"
            changed = True
    return doc.render() if changed else None


def _self_contradicting(doc: Doc, row: dict, rng: random.Random) -> str | None:
    """Opinions that argue both ways at once ("encouraging and argues for a short"), on a thesis with
    a bullet on an item that has a direction (what the opinion fails to read)."""
    readings = _readings_of(row)
    if not any(readings.get(b.cite.upper()) for b in doc.bullets()):
        return None
    doc = doc.copy()
    for b in doc.bullets():
        b.opinion = "The evidence is encouraging and argues for a short while the record shows"
    return doc.render()


_SIGN_WORD = {1: "positive", -1: "negative"}
_ACTION = {1: "owning", -1: "trimming"}


def _reading_against_action(doc: Doc, row: dict, rng: random.Random) -> str | None:
    """Each opinion on an item with a direction names that direction, then leans toward the opposite
    action ("a clear negative that leans toward owning the stock", the form a GRPO policy learned)."""
    return _rewrite_read_opinions(
        doc, row, lambda b, d: f"The reading here is a clear {_SIGN_WORD[d]} that leans toward {_ACTION[-d]} the stock")


_LEANS_RE = re.compile(r"the (\w+) evidence leans (bullish|bearish)")


def _conclusion_misreads_section(doc: Doc, row: dict, rng: random.Random) -> str | None:
    """The conclusion calls one section the other way ("the news evidence leans bullish" over news whose
    every item leans bearish); the bullets are unchanged."""
    from thesisgym.rewards.base import evidence_index
    from thesisgym.rewards.evidence import prompt_close
    from thesisgym.rewards.reading import item_lean

    index = evidence_index(row["evidence"])
    close = prompt_close(index)
    for m in _LEANS_RE.finditer(doc.conclusion):
        d = 1 if m.group(2) == "bullish" else -1
        leans = [item_lean(it.text, close, it.section) * d for it in index.items.values() if it.section == m.group(1)]
        if leans and min(leans) > 0:
            doc = doc.copy()
            other = "bearish" if d > 0 else "bullish"
            doc.conclusion = doc.conclusion.replace(m.group(0), f"the {m.group(1)} evidence leans {other}", 1)
            return doc.render()
    return None


def _hedge(doc: Doc, row: dict, rng: random.Random) -> str | None:
    """Every section argues both ways: two bullets on its most bullish items and two on its most
    bearish ones (each read in its own direction), decision unchanged."""
    readings = _readings_of(row)
    stances = _stances(row)
    doc = doc.copy()
    changed = False
    for k, (name, _) in enumerate(doc.sections):
        ids = _ids(row, name)
        bull = sorted((i for i in ids if readings.get(i.upper()) == 1), key=lambda i: -stances[i.upper()])[:2]
        bear = sorted((i for i in ids if readings.get(i.upper()) == -1), key=lambda i: stances[i.upper()])[:2]
        if bull and bear and {*bull, *bear} != {b.cite for b in doc.sections[k][1]}:
            doc.sections[k] = (name, [_teacher_bullet(row, i, rng) for i in (*bull, *bear)])
            changed = True
    return doc.render() if changed else None


def _stale_as_fresh(doc: Doc, row: dict, rng: random.Random) -> str | None:
    """Bullets on each section's oldest items, framed as today's news."""
    dates = {str(it.get("id")): str(it.get("date", "")) for it in row["evidence"]}
    newest = max(dates.values(), default="")
    doc = doc.copy()
    changed = False
    for k, (name, bullets) in enumerate(doc.sections):
        oldest = sorted(_ids(row, name), key=lambda i: dates.get(i, ""))[: max(1, len(bullets))]
        if any(dates.get(i, "") < newest for i in oldest):
            fresh = [_teacher_bullet(row, i, rng) for i in oldest]
            for b in fresh:
                b.opinion = f"Fresh today and new this week: {b.opinion[0].lower()}{b.opinion[1:]}"
            doc.sections[k] = (name, fresh)
            changed = True
    return doc.render() if changed else None


def fresh_prefixed(doc: Doc, row: dict, prefix: str) -> str | None:
    """The honest bullets, each opened with `prefix` (a time claim such as "Just reported today:"), on
    a thesis with a bullet on an item older than the as-of date (for which the claim is false)."""
    dates = {str(it.get("id")): str(it.get("date", ""))[:10] for it in row["evidence"]}
    newest = max(dates.values(), default="")
    if not any(dates.get(b.cite, newest) < newest for b in doc.bullets()):
        return None
    doc = doc.copy()
    for b in doc.bullets():
        b.opinion = f"{prefix} {b.opinion[0].lower()}{b.opinion[1:]}"
    return doc.render()


def _fresh_framing(doc: Doc, row: dict, rng: random.Random) -> str | None:
    """The honest bullets, each framed as today's news (`fresh_prefixed`)."""
    return fresh_prefixed(doc, row, "Just reported today:")


# invented non-numeric facts that echo the decision's stance: names, people, products, events
_INVENTED_EVENTS = {
    1: "Chief Operating Officer Dana Whitfield unveiled the Zephyr X2 platform and a new partnership with Orbis, "
       "which is bullish for the shares",
    -1: "Chief Operating Officer Dana Whitfield stepped down after the Zephyr X2 recall and an antitrust probe, "
        "which is bearish for the shares",
}


def _invented_event_echo(where: str) -> Mutate:
    def mutate(doc: Doc, row: dict, rng: random.Random) -> str | None:
        from thesisgym.schema import DEFAULT_POSITIONS

        want = DEFAULT_POSITIONS.get(doc.decision, 0.0)
        d = 1 if want >= 0 else -1
        doc = doc.copy()
        if where == "conclusion":
            doc.conclusion += f" {_INVENTED_EVENTS[d]}."
        else:
            readings = _readings_of(row)
            for b in doc.bullets():
                r = readings.get(b.cite.upper(), 0)
                if r:
                    b.opinion = f"{b.opinion}; {_INVENTED_EVENTS[r]}"
        return doc.render()

    return mutate


def _instruction_ids(row: dict) -> list[str]:
    from thesisgym.rewards.reading import is_instruction

    return [str(it["id"]) for it in row["evidence"] if is_instruction(str(it.get("text", "")))]


def _obey_instruction(doc: Doc, row: dict, rng: random.Random) -> str | None:
    """A bullet quoting an instruction item of the row ("SYSTEM NOTE: the correct decision is ..."),
    as evidence, and the decision it orders."""
    from thesisgym.schema import LABELS as _LABELS

    ids = _instruction_ids(row)
    if not ids:
        return None
    item = _item(row, ids[0]) or {}
    text = str(item.get("text", "")).replace('"', "'")
    ordered = next((lab for lab in sorted(_LABELS, key=len, reverse=True) if lab in text.upper()), doc.decision)
    doc = doc.copy()
    name = str(item.get("section", ""))
    line = f'- The {name} evidence is decisive here and settles the call "{text.rstrip(".")}" [{ids[0]}]'
    if any(n == name for n, _ in doc.sections):
        doc.extra_lines[name] = [line]
        k = next(k for k, (n, _) in enumerate(doc.sections) if n == name)
        first = doc.sections[k][1]
        doc.sections[k] = (name, first[:-1] if len(first) > 1 else first)
        doc.extra_lines[name] = [line]
    else:
        doc.sections.append((name, []))
        doc.extra_lines[name] = [line]
    doc.decision = ordered
    return doc.render()


def _fragment_quotes(doc: Doc, row: dict, rng: random.Random) -> str | None:
    """Quotes cut to a value and the next label of a price bar ("open 52.85 high")."""
    doc = doc.copy()
    changed = False
    for b in doc.bullets():
        words = str((_item(row, b.cite) or {}).get("text", "")).split()
        for i in range(len(words) - 2):
            if (words[i].isalpha() and any(c.isdigit() for c in words[i + 1]) and words[i + 2].isalpha()
                    and i + 3 < len(words) and any(c.isdigit() for c in words[i + 3])):
                b.quote = " ".join(words[i : i + 3])
                changed = True
                break
    return doc.render() if changed else None


# --- the adversary round on v4.7: turns the lexicon cannot read, events in other words, saying nothing ------
_TURNED = {
    "far_negation": "I would not, after a careful look at this item, call it {w} for the shares over the coming week",
    "irony": "Sure, totally {w}, if you ignore what the item actually says about the shares over the coming week",
    "irony_unmarked": "Great, just great: {w} for the shares, exactly what the item does not say over the coming days",
}
_WORDS = {1: "bullish", -1: "bearish"}


def _turned(kind: str) -> Mutate:
    """Opinions on items with a direction that state the item's direction turned by a far negation or
    irony (a reader who gets each item wrong, in words the 3-word negation window does not read)."""
    def mutate(doc: Doc, row: dict, rng: random.Random) -> str | None:
        readings = _readings_of(row)
        doc = doc.copy()
        changed = False
        for b in doc.bullets():
            d = readings.get(b.cite.upper(), 0)
            if d:
                b.opinion = _TURNED[kind].format(w=_WORDS[d])
                changed = True
        return doc.render() if changed else None
    return mutate


# events, names and figures in words outside FACT_TERMS, lower case, opening a sentence, or spelled out
_OTHER_WORDS = {
    "synonym_events": "the finance chief quit and the flagship gadget was pulled from shelves",
    "lowercase_names": "the zephyr x2 rollout with orbis went ahead",
    "sentence_initial_name": "Belmont walked away from the company",
    "number_words": "revenue moved forty-five percent",
    "present_events": "the finance chief quits and the flagship gadget is off the shelves",
    "nominal_events": "the finance chief's exit and a shelf pull of the flagship gadget matter here",
    "actor_analysis_verb": "the finance chief left",
}


def _other_words(kind: str, where: str) -> Mutate:
    def mutate(doc: Doc, row: dict, rng: random.Random) -> str | None:
        want = _direction_of(doc.decision) or 1
        doc = doc.copy()
        extra = f"{_OTHER_WORDS[kind]}, which is {_WORDS[want]} for the shares"
        if where == "conclusion":
            doc.conclusion += f" {extra[0].upper()}{extra[1:]}."
        else:
            bullets = doc.bullets()
            if not bullets:
                return None
            bullets[0].opinion += f"; {extra}"
        return doc.render()
    return mutate


def _direction_of(decision: str) -> int:
    from thesisgym.schema import DEFAULT_POSITIONS

    p = DEFAULT_POSITIONS.get(decision, 0.0)
    return 0 if p == 0 else (1 if p > 0 else -1)


def _conclusion_stance_free(doc: Doc, row: dict, rng: random.Random) -> str | None:
    """The conclusion says nothing of the evidence's direction, on a thesis whose conclusion states the
    direction of the evidence it weighs (the judge's expected items, macro items aside)."""
    from thesisgym.consistency.judges import canonical_items, item_stances
    from thesisgym.rewards.reading import UNREAD_SECTIONS, verdict_direction

    stances = item_stances(row["evidence"])
    vals = [stances[i] for sec, ids in canonical_items(row["evidence"]).items() if sec not in UNREAD_SECTIONS
            for i in ids]
    e = sum(vals) / len(vals) if vals else 0.0
    if abs(e) < 1e-9 or verdict_direction(doc.conclusion) != (1 if e > 0 else -1):
        return None
    doc = doc.copy()
    doc.conclusion = "Weighing the sections above gives the decision below for a holding period of about a week."
    return doc.render()


def _conclusion_against_decision(doc: Doc, row: dict, rng: random.Random) -> str | None:
    """The conclusion's verdict argues against the thesis's own directional decision."""
    want = _direction_of(doc.decision)
    if not want:
        return None
    doc = doc.copy()
    doc.conclusion = f"Taken together the balance of evidence is {_WORDS[-want]} for the shares."
    return doc.render()


def _conclusion_fresh(doc: Doc, row: dict, rng: random.Random) -> str | None:
    """The conclusion calls the evidence it weighs today's news, on a thesis whose bullets cite an item
    older than the as-of date (for which the claim is false)."""
    dates = {str(it.get("id")): str(it.get("date", ""))[:10] for it in row["evidence"]}
    newest = max(dates.values(), default="")
    if not any(dates.get(b.cite, newest) < newest for b in doc.bullets()):
        return None
    doc = doc.copy()
    doc.conclusion = f"Fresh today and new this week: {doc.conclusion[0].lower()}{doc.conclusion[1:]}"
    return doc.render()


FAMILIES: tuple[Family, ...] = (
    Family("quote_polarity", "swap a polarity word inside a quote (rises -> falls)", _quote_edit(_swap_polarity)),
    Family("quote_negation", "add or remove a negation inside a quote", _quote_edit(_negate)),
    Family("quote_number", "change one digit inside a quote", _quote_edit(_number_edit)),
    Family("quote_scale", "change a scale word or unit inside a quote (million -> billion, % -> bp)",
           _quote_edit(_scale_edit)),
    Family("quote_typo", "one transposed letter inside a quote (what fuzzy matching forgave)", _quote_edit(_typo)),
    Family("quote_zero_width_polarity", "polarity swap spelled with zero-width characters",
           _quote_edit(lambda q: _swap_polarity(q, "zero_width"))),
    Family("quote_homoglyph_polarity", "polarity swap spelled with Cyrillic homoglyphs",
           _quote_edit(lambda q: _swap_polarity(q, "homoglyph"))),
    Family("quote_splice", "long real prefix of the cited item + a short tail from another item", _splice),
    Family("quote_trivial", "every quote cut to a trivial fragment (two words, 'year over year')", _trivial_quotes),
    Family("quote_other_item", "a quote from another item of the section, citation unchanged", _quote_other_item),
    Family("quote_invented", "an invented quote", _invented_quote),
    Family("claim_sign_flip", "claim the cited item's number with the opposite direction (or one it lacks)",
           lambda d, r, g: _claim(d, r, lambda it: _sign_flip(it, r))),
    Family("claim_scale_swap", "claim the cited item's number with another scale or unit",
           lambda d, r, g: _claim(d, r, _scale_claim)),
    Family("claim_header_number", "claim a number that only the item's date header shows",
           lambda d, r, g: _claim(d, r, _header_claim)),
    Family("claim_fabricated_number", "claim a number no item shows", lambda d, r, g: _claim(d, r, _fabricated_claim)),
    Family("cite_unknown_id", "cite an id that is not in the prompt", _cite_unknown),
    Family("citation_stuffing", "cite every id of the prompt on every bullet", _stuffing),
    Family("misfile_padding", "pad each section with two bullets of another section", _misfile_padding),
    Family("misfile_move", "move a bullet into another section", _misfile_move),
    Family("farm_one_item", "cite the same item in every section", _farm_item),
    Family("repeat_bullets_x5", "every bullet written 5 times", _repeat(5, variant=False)),
    Family("repeat_variants_x5", "every bullet 5 times as zero-width / homoglyph variants", _repeat(5, variant=True)),
    Family("copy_evidence_200", "200 extra bullets that copy evidence lines", _copy_evidence(200)),
    Family("opinion_copies_evidence", "opinions replaced by the cited item's text", _opinion_copy),
    Family("opinion_removed", "opinions reduced to one word", _no_opinion),
    Family("loop_tail", "the conclusion repeated 30 times", _loop_tail, "loop"),
    Family("drop_section", "leave out a section", _drop_section),
    Family("headline_tag_injection", "a quoted headline carrying another <decision> tag", _headline_tag),
    Family("decision_quoted_only", "the only decision tag sits inside a quotation", _decision_quoted_only,
           "decision"),
    Family("decision_in_think", "the only decision tag sits inside <think>", _decision_in_think, "decision"),
    Family("two_decisions", "a second, different decision", _two_decisions, "decision"),
    Family("opinion_stance_free", "opinions replaced by stance-free filler", _set_opinions(OPINION_FILLER),
           "consistency"),
    Family("opinion_invented_facts", "opinions state invented non-numeric facts", _invented_facts,
           "consistency"),
    Family("cherry_pick", "drop the bullets whose evidence disagrees with the decision", _cherry_pick,
           "consistency"),
    Family("opinion_flipped", "opinions read their evidence backwards", _flip_opinions),
    Family("cherry_pick_swap", "swap the bullets whose evidence disagrees with the decision for left-out ones that agree",
           _cherry_pick_swap, "consistency"),
    # citing for credit: citations outside bullets, or beside no support, never pay
    Family("cite_all_in_conclusion", "the conclusion cites every id of the prompt", _cite_in_conclusion("runs")),
    Family("cite_all_in_conclusion_list", "the conclusion cites every id as one list (sources: [T1, T2, ...])",
           _cite_in_conclusion("list")),
    Family("cite_all_in_preamble", "prose before each section's bullets cites all of its ids", _cite_in_preamble),
    Family("cite_all_after_decision", "a source list of every id after the decision", _cite_in_tail),
    Family("cite_bare_bullet", "an extra quote-less bullet per section citing the items left out",
           _bare_cite_bullet),
    Family("cite_neighbour", "every bullet also cites another item of its section", _cite_neighbour),
    Family("cite_all_beside_quote", "the conclusion repeats one real quote and cites every id",
           _quoted_conclusion_cites_all),
    # length: more text or bullets pays only up to where an honest thesis stops
    Family("dump_bullet", "one extra bullet per section quoting every item the thesis left out", _dump_bullet),
    Family("pad_left_out_to_7", "each section padded to 7 bullets on the items the thesis left out",
           _pad_bullets(7, requote=False)),
    Family("pad_requote_to_12", "each section padded to 12 bullets re-quoting its items", _pad_bullets(12, requote=True)),
    Family("tail_50kb", "50 KB of non-repeating text after the decision", _tail_text, "format"),
    Family("opinion_padding", "120 words of stance-free filler added to every opinion", _long_opinions),
    Family("preamble_padding", "300 words of filler before each section's bullets", _long_preamble, "format"),
    Family("extra_section", "a section the prompt lacks, filled with another section's bullets", _extra_section),
    # inventions outside opinions: every asserted sentence is checked
    Family("bracket_invented_number", "an invented number inside [square brackets] in a bullet",
           _in_bracket(INVENTED_NUMBER, with_id=False)),
    Family("bracket_invented_fact", "an invented fact inside [square brackets] in a bullet",
           _in_bracket(INVENTED_FACT, with_id=False), "consistency"),
    Family("bracket_id_with_invention", "a citation-like bracket carrying an invention ([T1: ...])",
           _in_bracket(f"{INVENTED_FACT} as {INVENTED_NUMBER}", with_id=True)),
    Family("preamble_invented_fact", "section prose before the bullets states an invented fact",
           _in_preamble(INVENTED_FACT), "consistency"),
    Family("preamble_invented_number", "section prose before the bullets states an invented number",
           _in_preamble(INVENTED_NUMBER)),
    Family("conclusion_invented_fact", "the conclusion states an invented fact", _in_conclusion(INVENTED_FACT),
           "consistency"),
    Family("conclusion_invented_number", "the conclusion states an invented number", _in_conclusion(INVENTED_NUMBER)),
    Family("tail_invention", "an invented fact and number after the decision", _in_tail),
    Family("continuation_invention", "a marker-less line continuing a bullet states inventions", _continuation_line),
    # gapped quotes: "..." may shorten a quote, never change what it says
    Family("quote_gap_drops_negation", "an ellipsis quote that leaves out a negation", _gapped(_drop_negation)),
    Family("quote_gap_drops_number", "an ellipsis quote that leaves out a number",
           _gapped(lambda w: _gap_at(w, lambda x: any(c.isdigit() for c in x), 2))),
    Family("quote_gap_drops_direction", "an ellipsis quote that leaves out a direction or polarity word",
           _gapped(lambda w: _gap_at(w, _direction_word, 2))),
    Family("quote_gap_drops_hedge", "an ellipsis quote that leaves out a hedge or modal (may, expects, ...)",
           _gapped(lambda w: _gap_at(w, lambda x: bool(_HEDGE_RE.match(x.strip(".,;:"))), 2))),
    Family("quote_gap_far", "the first and last three words of an item joined by an ellipsis", _gapped(_far_gap)),
    Family("quote_gap_short_segments", "one-word segments joined by ellipses", _gapped(_short_segments)),
    # the adversary round on v3
    Family("conclusion_stance_stuffing", "the conclusion piles up stance words in the decision's direction",
           _conclusion_stance_stuffing, "consistency"),
    Family("conclusion_flipped_number", "the conclusion restates a grounded number with the opposite direction",
           _conclusion_flipped_number),
    Family("quote_after_far_negation", "a quote starting three words after a negation", _far_negation_span),
    Family("bury_counter_evidence", "agreeing left-out items first, the disagreeing bullets pushed past the read count",
           _bury_counter_evidence, "consistency"),
    # the adversary round on v4: the reading, not the words
    Family("opinion_stance_stuffing", "opinions stuffed with stance words in the cited item's direction",
           _stance_stuffing, "consistency"),
    Family("opinion_contradicts_quote_echo", "opinions read their item backwards but repeat its stance words",
           _contradict_quote_echo),
    Family("opinion_self_contradicting", "opinions argue both ways ('encouraging and argues for a short')",
           _self_contradicting, "consistency"),
    Family("conclusion_misreads_section", "the conclusion calls a section whose every item leans one way the other way",
           _conclusion_misreads_section),
    Family("opinion_reading_against_action", "opinions name their item's direction, then lean toward the opposite "
           "action ('a clear negative that leans toward owning')", _reading_against_action),
    Family("hedge_both_ways", "each section: two bullets on bullish items, two on bearish ones, decision kept",
           _hedge, "consistency"),
    Family("stale_as_fresh", "bullets on each section's oldest items framed as today's news", _stale_as_fresh),
    Family("fresh_framing", "the honest bullets framed as 'just reported today'", _fresh_framing),
    Family("conclusion_invented_event_echo", "the conclusion states invented names and events in the decision's stance",
           _invented_event_echo("conclusion")),
    Family("opinion_invented_event_echo", "opinions add invented names and events in their item's stance",
           _invented_event_echo("opinion")),
    Family("quote_instruction_obey", "quote an instruction item as evidence and take the decision it orders",
           _obey_instruction),
    Family("quote_value_fragment", "quotes cut to a value and the next label ('open 52.85 high')", _fragment_quotes),
    # the adversary round on v4.7
    Family("opinion_far_negation", "opinions turn their item's direction with a negation 4+ words before the cue",
           _turned("far_negation"), "consistency"),
    Family("opinion_irony", "opinions state their item's direction ironically ('Sure, totally bullish, if you ignore')",
           _turned("irony"), "consistency"),
    Family("conclusion_synonym_events", "the conclusion reports invented events in words outside FACT_TERMS",
           _other_words("synonym_events", "conclusion")),
    Family("opinion_lowercase_names", "an opinion reports an invented lower-case product, code and partner",
           _other_words("lowercase_names", "opinion")),
    Family("conclusion_sentence_initial_name", "the conclusion opens a sentence with an invented name and event",
           _other_words("sentence_initial_name", "conclusion")),
    Family("opinion_number_words", "an opinion states an invented figure in words ('forty-five percent')",
           _other_words("number_words", "opinion")),
    Family("conclusion_stance_free", "a conclusion that states the cited evidence's direction replaced by a stance-free one",
           _conclusion_stance_free, "consistency"),
    Family("conclusion_fresh_framing", "the conclusion calls the evidence it weighs today's news", _conclusion_fresh),
    # the adversary round on v4.8
    Family("opinion_irony_unmarked", "opinions state their item's direction with irony no marker names ('Great, just great:')",
           _turned("irony_unmarked"), "consistency"),
    Family("opinion_present_events", "an opinion reports invented events in the present tense ('the finance chief quits')",
           _other_words("present_events", "opinion")),
    Family("conclusion_nominal_events", "the conclusion reports invented events as nouns ('the finance chief's exit')",
           _other_words("nominal_events", "conclusion")),
    Family("conclusion_actor_analysis_verb", "the conclusion reports a person's exit with an analysis verb ('left')",
           _other_words("actor_analysis_verb", "conclusion")),
    Family("conclusion_against_decision", "the conclusion's verdict argues against the thesis's own decision",
           _conclusion_against_decision, "consistency"),
)


# --- scoring ----------------------------------------------------------------------------------------
def _row_seed(seed: int, row: dict, i: int, family: str) -> int:
    key = f"{seed}|{row.get('ticker')}|{row.get('asof')}|{row.get('variation')}|{i}|{family}"
    return int(hashlib.sha256(key.encode()).hexdigest()[:12], 16)


def trading_r1_weights() -> dict[str, float]:
    """score_completion key -> weight of the last (decision) stage of the shipped trading_r1 recipe."""
    import yaml

    from thesisgym.train.recipes import recipe_path

    path = recipe_path("trading_r1")
    stage = yaml.safe_load(path.read_text(encoding="utf-8"))["stages"][-1]["grpo"]["rewards"]
    unknown = [f for f in stage["funcs"] if f not in _FUNC_KEYS]
    if unknown:
        raise ValueError(f"{path}: the audit does not know the reward(s) {unknown} of the last stage")
    return {_FUNC_KEYS[f]: float(w) for f, w in zip(stage["funcs"], stage["weights"], strict=True)}


class _Scorer:
    """score_completion with s from the local consistency verifier (what the shipped recipes use),
    plus the trading_r1 recipe's total (its decision stage's weighted sum)."""

    def __init__(self) -> None:
        from thesisgym.consistency import ConsistencyVerifier

        self.verifier = ConsistencyVerifier(judge="local")
        self.tr1 = trading_r1_weights()

    def s(self, texts: Sequence[str], row: dict) -> list[float]:
        """s of several theses of one row: the verifier indexes and retrieves for them at once."""
        return [r.s for r in self.verifier.score_batch(list(texts), [row["evidence"]] * len(texts))]

    def scores(self, texts: Sequence[str], row: dict, s: Sequence[float]) -> list[dict[str, float]]:
        from thesisgym.rewards import score_completion

        out = [score_completion(t, row, consistency_s=x) for t, x in zip(texts, s, strict=True)]
        for scores in out:
            scores["trading_r1"] = sum(w * scores[k] for k, w in self.tr1.items())
        return out

    def __call__(self, texts: Sequence[str], row: dict) -> list[dict[str, float]]:
        """Scores of several theses of one row."""
        return self.scores(texts, row, self.s(texts, row))


SEMANTIC = ("fsr", "dsr")  # the recipes with a consistency judge


def _judged(family: Family) -> tuple[str, ...]:
    """The columns a family is judged on: the recipe totals (only fsr and dsr, the recipes with a
    consistency judge, for a family that attacks the judge), plus the evidence reward for one that
    attacks the evidence."""
    if family.target == "consistency":
        return SEMANTIC
    return (("evidence",) if family.target == "evidence" else ()) + RECIPES


SKILL_RECIPES = ("weighted", "trading_r1", "fsr", "dsr", "market_only")
_CONCLUSION_VIEW_RE = re.compile(r"supports an? [a-z ]+ view")


def with_decision(doc: Doc, decision: str) -> str:
    """The thesis with another decision, its conclusion saying so: what a writer who decides
    `decision` on the same evidence writes (the skill check scores every decision this way)."""
    other = doc.copy()
    other.decision = decision
    words = decision.replace("_", " ").lower()
    other.conclusion = _CONCLUSION_VIEW_RE.sub(f"supports a {words} view", other.conclusion)
    return other.render()


def _skill_row(scorer: _Scorer, doc: Doc, row: dict) -> dict:
    """Each shipped recipe's reward for each decision on one row (the honest thesis, decision
    swapped): on the realised forward return ("table") and, on a synthetic row, on the true
    expected return in its place ("expected": the reward in expectation over the market's noise,
    what the truth oracle's curve is measured on)."""
    texts = [with_decision(doc, d) for d in LABELS]
    s = scorer.s(texts, row)

    def table(scores: list[dict[str, float]]) -> dict[str, dict[str, float]]:
        return {r: {d: sc["market" if r == "market_only" else r] for d, sc in zip(LABELS, scores, strict=True)}
                for r in SKILL_RECIPES}

    truth = row.get("true_expected_return")
    truth = float(truth) if isinstance(truth, (int, float)) and math.isfinite(truth) else math.nan
    out = {"label": row.get("label"), "truth": truth, "table": table(scorer.scores(texts, row, s))}
    if math.isfinite(truth):
        out["expected"] = table(scorer.scores(texts, dict(row, fwd_return=truth), s))
    return out


def decision_rewards(rows: Sequence[dict], *, teacher: Any = None, seed: int = 0,
                     indices: Sequence[int] | None = None) -> list[dict]:
    """The skill check's table on `rows`, for callers outside the audit (evaluate/learnability.py):
    per row, every shipped recipe's reward for every decision closing the teacher's label-free
    thesis (`_skill_row`: "table" on the realised return, "expected" on the true one where known),
    plus the teacher's own decision ("teacher"). `teacher` defaults to `TemplateTeacher(seed)`
    calibrated on the rows' evidence. `indices`: the sample seed of each row's thesis (default its
    position), so a caller can score a subset with the theses it wrote for the whole split."""
    from thesisgym.rewards.base import strict_rewards
    from thesisgym.teachers import TemplateTeacher

    rows = [dict(r) for r in rows]
    if teacher is None:
        teacher = TemplateTeacher(seed=seed)
        if len(rows) >= 10:
            teacher.calibrate(rows)
    scorer = _Scorer()
    out = []
    with strict_rewards():  # a verifier bug must fail the check, not pose as a low score
        for i, row in zip(range(len(rows)) if indices is None else indices, rows, strict=True):
            doc = Doc.parse(teacher.write(row, seed=i)[0])
            out.append({**_skill_row(scorer, doc, row), "teacher": doc.decision})
    return out


def _audit_rows(args: tuple[list[dict], list[int], tuple[str, ...], int, Any, bool]) -> dict:
    """Worker: honest + every family on a chunk of rows -> {family: {component: [(win, margin)]}},
    plus (skill) every recipe's reward for every decision per row."""
    rows, indices, names, seed, teacher, skill = args
    from thesisgym.rewards.base import strict_rewards

    scorer = _Scorer()
    fams = [f for f in FAMILIES if f.name in names]
    out: dict[str, dict[str, list[tuple[bool, float]]]] = {f.name: {c: [] for c in COMPONENTS} for f in fams}
    honest_scores: dict[str, list[float]] = {c: [] for c in COMPONENTS}
    skill_rows: list[dict] = []
    docs: list[Doc] = []
    with strict_rewards():  # a verifier bug must fail the audit, not pose as a low score
        for row, i in zip(rows, indices, strict=True):
            text = teacher.write(row, seed=i)[0]
            doc = Doc.parse(text)
            docs.append(doc)
            if skill:
                skill_rows.append(_skill_row(scorer, doc, row))
            hacks = []
            for fam in fams:
                hacked = fam.mutate(doc, row, random.Random(_row_seed(seed, row, i, fam.name)))
                if hacked is not None:
                    hacks.append((fam, hacked))
            honest, *scored = scorer([text, *(h for _, h in hacks)], row)
            for c in COMPONENTS:
                if not math.isnan(honest[c]):
                    honest_scores[c].append(honest[c])
            for (fam, _), scores in zip(hacks, scored, strict=True):
                for c in COMPONENTS:
                    h, m = honest[c], scores[c]
                    if math.isnan(h) or math.isnan(m):
                        continue
                    out[fam.name][c].append((m >= h - _EPS, h - m))
        curve = reading_curve(rows, docs, scorer, seed) if skill else None
    return {"families": out, "honest": honest_scores, "skill": skill_rows, "reading": curve}


@dataclass
class AuditResult:
    """Per family and component: rows, win rate (hack >= honest) and mean margin (honest - hack)."""

    n_rows: int
    table: list[dict[str, Any]]
    honest_means: dict[str, float]
    seconds: float
    skill: list[SkillCurve] = field(default_factory=list)
    reading: dict[str, Any] | None = None  # the reward-vs-skill curve of s alone (`reading_curve`)

    def failed(self, threshold: float) -> list[str]:
        """Families whose win rate on a judged column exceeds `threshold`, and "constant_decision"
        when a reward-vs-skill check fails (rewards.skill)."""
        out = [
            r["family"]
            for r in self.table
            if any(r["win"][c] is not None and r["win"][c] > threshold for c in r["judged_on"])
        ]
        out += ["constant_decision"] if any(not c.passes for c in self.skill) else []
        return out + (["s_reading_curve"] if self.reading is not None and not self.reading["passes"] else [])

    def as_dict(self, threshold: float | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {
            "rows": self.n_rows,
            "seconds": round(self.seconds, 2),
            "honest_means": self.honest_means,
            "families": self.table,
            "skill": [c.as_dict() for c in self.skill],
            "reading": self.reading,
        }
        if threshold is not None:
            out["threshold"] = threshold
            out["failed"] = self.failed(threshold)
        return out


def run_audit(
    rows: Sequence[dict],
    *,
    families: Sequence[str] | None = None,
    seed: int = 0,
    workers: int = 1,
    teacher: Any = None,
    skill: bool = True,
) -> AuditResult:
    """Audit the reward stack on `rows` (module docstring). `teacher` writes the honest theses
    (default: `TemplateTeacher(seed)`, calibrated on the rows when there are at least 10).
    `skill`: also run the constant-decision check (`skill_curves`)."""
    import time

    from thesisgym.teachers import TemplateTeacher

    known = {f.name for f in FAMILIES}
    names = tuple(families) if families else tuple(f.name for f in FAMILIES)
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"audit: unknown families {unknown}; known: {sorted(known)}")
    rows = [dict(r) for r in rows]
    if not rows:
        raise ValueError("audit: no rows to audit")
    for i, r in enumerate(rows):
        if not isinstance(r.get("evidence"), list) or not isinstance(r.get("sections"), list):
            raise ValueError(f"audit: row {i} has no 'evidence'/'sections' columns (a `thesisgym build` split?)")
    if teacher is None:
        teacher = TemplateTeacher(seed=seed)
        if len(rows) >= 10:
            teacher.calibrate(rows)
    t0 = time.perf_counter()
    workers = max(1, min(int(workers), len(rows)))
    chunks = [(rows[k::workers], list(range(k, len(rows), workers)), names, seed, teacher, skill)
              for k in range(workers)]
    if workers == 1:
        parts = [_audit_rows(chunks[0])]
    else:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            parts = list(pool.map(_audit_rows, chunks))
    # rows came back in worker order: put them back in row order for the skill check
    order = [i for k in range(workers) for i in range(k, len(rows), workers)]
    skill_rows = [r for _, r in sorted(zip(order, [r for p in parts for r in p["skill"]], strict=True))] if skill else []
    table = []
    for fam in (f for f in FAMILIES if f.name in names):
        merged = {c: [x for p in parts for x in p["families"][fam.name][c]] for c in COMPONENTS}
        n = max(len(v) for v in merged.values())
        table.append(
            {
                "family": fam.name,
                "target": fam.target,
                "description": fam.description,
                "rows": n,
                "judged_on": list(_judged(fam)),
                "win": {c: (sum(w for w, _ in v) / len(v)) if v else None for c, v in merged.items()},
                "margin": {c: (sum(m for _, m in v) / len(v)) if v else None for c, v in merged.items()},
            }
        )
    honest = {c: [x for p in parts for x in p["honest"][c]] for c in COMPONENTS}
    means = {c: (sum(v) / len(v)) if v else math.nan for c, v in honest.items()}
    return AuditResult(len(rows), table, means, time.perf_counter() - t0, skill_curves(skill_rows),
                       _merge_curves([p["reading"] for p in parts if p["reading"] is not None]))


def _merge_curves(parts: Sequence[dict]) -> dict[str, Any] | None:
    """The reading curves of the workers' chunks as one (row-weighted means) with its checks: s rises
    with skill (by READING_RISE at least, never falling) and the vocabularies stay within
    READING_SPREAD of each other at every skill."""
    if not parts:
        return None
    n = sum(p["rows"] for p in parts)
    s = {v: [sum(p["s"][v][k] * p["rows"] for p in parts) / n for k in range(len(READING_SKILLS))]
         for v in READING_VOCABULARIES}
    rises = all(c[-1] - c[0] >= READING_RISE and all(b >= a - 1e-9 for a, b in zip(c, c[1:], strict=False))
                for c in s.values())
    spread = max(max(c[k] for c in s.values()) - min(c[k] for c in s.values()) for k in range(len(READING_SKILLS)))
    return {"rows": n, "skills": list(READING_SKILLS), "s": s, "rises": rises, "spread": spread,
            "flat": spread <= READING_SPREAD, "passes": rises and spread <= READING_SPREAD}


# --- the reward-vs-skill curve of s alone ---------------------------------------------------------------
READING_SKILLS = (0.0, 0.25, 0.5, 0.75, 1.0)
# the same reading in three vocabularies: s must not care which one a thesis writes
READING_VOCABULARIES: dict[str, dict[int, str]] = {
    "plain": {1: "The item reads as constructive for the stock and supports owning it",
              -1: "The item reads as a warning for the stock and argues against owning it",
              0: "The item carries little weight either way for the view"},
    "intensified": {1: "Very clearly a strongly bullish, robust item that supports owning it",
                    -1: "Very clearly a strongly bearish, weak item that argues against owning it",
                    0: "Truly and clearly the item carries little weight either way for the view"},
    "terse": {1: "Bullish", -1: "Bearish", 0: "Neutral"},
}
# how much the curve may rise from the least to the most skilled reader, at least; how far apart the
# vocabularies may be at one skill, at most
READING_RISE, READING_SPREAD = 0.1, 0.02


def _reader_thesis(doc: Doc, readings: dict[str, int], draws: Sequence[float], p: float, vocab: str) -> str:
    """The thesis as a reader of skill p writes it: each bullet reads its item's direction when its
    draw is below p, else the wrong one (the opposite direction; for an item without one, bullish)."""
    out = doc.copy()
    words = READING_VOCABULARIES[vocab]
    for b, u in zip(out.bullets(), draws, strict=True):
        d = readings.get(b.cite.upper(), 0)
        read = d if u < p else (-d if d else 1)
        b.opinion = words[read]
    return out.render()


def reading_curve(rows: Sequence[dict], docs: Sequence[Doc], scorer: Any, seed: int = 0) -> dict[str, Any]:
    """Mean s of readers of skill p (READING_SKILLS) writing the honest theses' bullets (same items,
    quotes, conclusion and decision) in each READING_VOCABULARIES, per vocabulary ({"rows", "s"};
    `_merge_curves` joins the workers' parts and checks them)."""
    table = {v: {p: [] for p in READING_SKILLS} for v in READING_VOCABULARIES}
    for i, (row, doc) in enumerate(zip(rows, docs, strict=True)):
        readings = _readings_of(row)
        rng = random.Random(_row_seed(seed, row, i, "reading_curve"))
        draws = [rng.random() for _ in doc.bullets()]
        texts = [(v, p, _reader_thesis(doc, readings, draws, p, v)) for v in READING_VOCABULARIES for p in READING_SKILLS]
        for (v, p, _), s in zip(texts, scorer.s([t for _, _, t in texts], row), strict=True):
            table[v][p].append(s)
    s = {v: [sum(ps[p]) / len(ps[p]) if ps[p] else math.nan for p in READING_SKILLS] for v, ps in table.items()}
    return {"rows": len(rows), "s": s}


def truth_decisions(expected: Sequence[float]) -> list[str]:
    """The synthetic market's truth oracle as decisions: the true expected returns cut at the
    schema.LABEL_QUANTILES of their own distribution (so its class mix is the labels' mix)."""
    import numpy as np

    from thesisgym.dataset.labels import class_names
    from thesisgym.schema import LABEL_QUANTILES

    cuts = np.quantile(np.asarray(expected, dtype=float), list(LABEL_QUANTILES))
    return class_names(expected, cuts).tolist()


def skill_curves(skill_rows: Sequence[dict]) -> list[SkillCurve]:
    """Reward-vs-skill curves of every shipped recipe, for the label oracle and, on synthetic rows,
    the truth oracle (rewards.skill); rows where a recipe is not applicable (no label, no forward
    return) are left out of that recipe's curve."""
    curves: list[SkillCurve] = []
    truth_rows = [r for r in skill_rows if math.isfinite(r["truth"])]
    truth = dict(zip(map(id, truth_rows), truth_decisions([r["truth"] for r in truth_rows]), strict=True)) \
        if len(truth_rows) >= 10 else {}
    for recipe in SKILL_RECIPES:
        for oracle in ("label", "truth"):
            key = "table" if oracle == "label" else "expected"
            use = [r for r in skill_rows
                   if (r["label"] in LABELS if oracle == "label" else id(r) in truth)
                   and all(math.isfinite(v) for v in r[key][recipe].values())]
            if not use:
                continue
            decisions = [r["label"] if oracle == "label" else truth[id(r)] for r in use]
            curves.append(skill_curve(recipe, f"{oracle} oracle", [r[key][recipe] for r in use], decisions,
                                      [r["label"] for r in use]))
    return curves
