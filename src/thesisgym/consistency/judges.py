"""Stage 2 of the Trade-R1 verifier: triangular judges over the compressed context.

A judge returns three alignments in [0, 1] (Trade-R1's triangular consistency metric):
factuality  (evidence <-> reasoning), deduction (reasoning <-> decision), consistency
(evidence <-> decision). Two judges:

`LocalJudge` (default: deterministic, offline, ~1 ms per thesis with retrieval). Claims are the first
bullets of each section, as many as it has expected items (below; the judge reads no further, so
padding a section cannot move s), and every statement outside the bullets (section prose, the
conclusion, text outside the blocks). Per claim i:
- a bullet is judged against its own retrieved passages only (its cited ones + top-k), never the
  whole prompt. Its grounding g_i = the mean of the checks that apply, each asked of the evidence
  reward's own checker (`rewards.evidence` on the rewards' `EvidenceIndex` of the same evidence list,
  `PassageIndex.grounding`: one grounding checker): the precision of its citations (the ids that
  hold one of its credited quotes or back one of its numbers, over the ids it cites: citing is not
  support); each quote is a credited span of a cited item (1), a true span not credited there
  (uninformative, a number cut from its unit) or a span of another retrieved item (0.5), or none (0);
  the quantities of the opinion match those of its cited items (else of its retrieved ones) with
  direction, unit and scale. A bullet with none of these checks grounds nothing: g_i = 0.
- a statement outside the bullets may only restate the evidence the bullets ground (the items holding
  a credited quote or a backed number of a bullet, `EvidenceReport.grounded`) or that it quotes
  itself: g_i is its score in the evidence report (`evidence.check_statement`: 0 for an unknown id, a
  quote in no item or an unbacked number, else the precision of its citations against that evidence,
  less 1 % per id cited and a length term; 1 for a conclusion of at most 120 words that cites nothing,
  while prose and text outside the blocks always pay the length term), so a conclusion
  citing every id is graded for precision and earns nothing for count.
- g_i is multiplied by the fact support of the opinion: the share of the facts it states
  (`rewards.lexicon.FACT_TERMS`: actors, corporate events, business figures) found in its cited
  items (a bullet; else its retrieved passages), or in the items the read bullets ground (a
  statement), so "the
  chief executive resigned" over an item that says nothing of it does not count as agreeing with it.
- the reading, not the words (`rewards.reading`): c_i in {-1, 0, +1} is the opinion's own direction
  (`opinion_direction`: quotes removed; cues that repeat its cited items' words do not count; the
  sign of the net cue weight once it is clear, so more stance words, intensifiers or repeated cues
  add nothing; cues that cancel out give 0; 0 when more than half of its 4-grams copy the evidence);
  e_i the stance of what it reads (the whole texts of its cited items, else its retrieved passages
  weighted by score: lexicon, signed numbers, technical levels against the latest close) and its
  direction sign(e_i) once |e_i| >= ITEM_CLEAR (none for a macro item, `UNREAD_SECTIONS`, or an
  item that instructs the model). f_i = g_i when c_i is that direction, g_i / 2 for a direction
  given to an item without one, 0 otherwise: an opinion that contradicts its item scores as a
  contradiction whatever words it repeats, and one with no reading does not agree with an item that
  has one. Keyword salad costs: each stance cue past SALAD_CUES takes SALAD_COST of g_i. A bullet
  the evidence reward calls hallucinated (an invented id, quote, number, fact or name, a false
  time claim, a quoted instruction) has f_i = 0.
- a statement outside the bullets: c_i in {-1, 0, +1} is its verdict's direction (`verdict_direction`:
  its last sentence with a direction, read as a bullet's opinion), e_i the mean stance of the
  expected items (below; macro items aside): the evidence a conclusion weighs, which no choice of
  bullets can move; f_i = g_i max(0, 1 - |e_i| +
  c_i e_i): g_i when it states the direction of e_i, g_i (1 - |e_i|) when it states none, g_i (1 -
  2 |e_i|) when it states the opposite, so saying nothing never scores above stating the grounded
  direction; each stance cue of the verdict past SALAD_CUES takes SALAD_COST off f_i (which may then
  fall below 0).
Coverage: each section has its expected items (`canonical_items`: the min(SATURATION, n) items with
the strongest stance, the newest first among equals; what an honest thesis that stops at SATURATION
bullets covers). An expected item with a stance that no bullet grounds (a credited quote or backed
number: citing it is not enough) weighs into F as a claim with f = 0 (weight OMITTED_WEIGHT) and
into R at its own stance, so leaving out the evidence against the decision (cherry-picking, or
swapping it for weaker evidence) costs, while covering more than an honest thesis does earns nothing.
Then factuality F = sum f_i / (claims + OMITTED_WEIGHT * uncovered), where a statement's f_i counts as
min(f_i, F of the bullets) - STATEMENT_PENALTY (1 - f_i) (a statement outside the bullets can lower F,
never raise it, and an overstated one always costs); deduction D = F * (1 - |R - P| / 2) where P is the
decision's position (schema.DEFAULT_POSITIONS) and R the reasoning's reading of the expected items: the
f-weighted mean of the direction c of the read bullets that ground each expected item (a reading
with no direction, or one with f = 0, weighs nothing: a neutral item read as neutral says nothing
about the decision, and a misread item counts as not read) and of an uncovered expected item's own
stance (at the mean weight, as if read at face value: leaving out or swapping the evidence against
the decision cannot move R). A thesis that argues both ways reads R near 0, so a directional
decision on it loses deduction, and a statement whose verdict argues against the decision (a
conclusion that reads bearish over a BUY) sets D to 0: the decision does not follow from the reasoning as
written (and the statement's f_i is 0). Statements carry no weight in R (a conclusion loaded
with the decision's words cannot pull the reading), nor do bullets on items a section does not expect:
only grounded reasoning can support a decision, so a fluent story built on misread evidence earns no
deduction credit (this is what ranks "claims contradict the evidence" below "decision contradicts the
claims"); consistency C = 1 - |E - P|/2 with E the net-to-gross stance of every passage of the context
(sum e / sum |e|, 0 if no passage has a stance), so a thesis cannot choose the evidence its decision is
compared with by citing only what suits it, and E does not hang on the few passages a keyword query
happens to retrieve. No valid decision -> D = C = 0; no claims -> F = D = 0.

Stance (`rewards.reading.stance(text)`): a documented finance lexicon (`LEXICON`: beats/misses,
upgrade/downgrade, raises/cuts guidance, surges/plunges, insider buying/selling, bullish/bearish, ...;
multi-word phrases first), flipped by a negation within the three preceding words ("did not beat", "no
upgrade", "fails to beat"), plus explicitly signed percentages ("+3.1%" / "-2.4%"). Score = tanh(sum of
weights).

`LLMJudge`: one prompt per thesis with the compressed context, the claims and the decision; the answer
must be JSON {"factuality", "deduction", "consistency", "rationale"} (validated with pydantic, values
in [0, 1]); the whole batch runs concurrently through `thesisgym.llm.LLMClient`. FALLBACK: when the
request fails for good or the answer is still malformed after a retry, the verdict is the local
judge's for that thesis (fallback="local", default) or all three scores = a constant
(fallback=0.5 ...); `source` says which, the client counts `json_fallbacks`, and each fallback is a
counted error of the verifier (`rewards.base.record_error`: re-raised in strict mode).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field

from thesisgym.consistency.retrieval import Claim, JudgeContext, ThesisClaims
from thesisgym.rewards.base import record_error
from thesisgym.rewards.evidence import (
    SATURATION,
    EvidenceReport,
    evidence_report,
    opinion_copied_share,
    quantity_backed,
    quote_credited,
    quote_found,
    quote_too_short,
)
from thesisgym.rewards.lexicon import FACT_TERMS, LEXICON, NEGATIONS, fact_support
from thesisgym.rewards.reading import (
    ITEM_CLEAR,
    UNREAD_SECTIONS,
    is_instruction,
    latest_close,
    level_score,
    only_instruction,
    opinion_direction,
    stance,
    stance_cues,
    stance_score,
    verdict_direction,
    verdict_sentence,
)
from thesisgym.schema import DEFAULT_POSITIONS
from thesisgym.thesis import scan_quantities

# the vocabulary (LEXICON, NEGATIONS, FACT_TERMS) lives in rewards.lexicon and the reading (stance, item
# readings, opinion directions, instructions, time claims) in rewards.reading: the evidence reward reads
# them too
# weight of one expected item with a stance that no bullet grounds, relative to one claim (F and R)
OMITTED_WEIGHT = 0.5
# an item's stance must exceed this (in absolute value) for leaving it out to count
STANCE_FLOOR = 0.1
# stance cues an opinion may hold before each further one costs SALAD_COST of its claim (an honest
# opinion states its reading in one to three: "a clear positive that should help the price hold its gains")
SALAD_CUES = 4
SALAD_COST = 0.1
# what a statement outside the bullets pays per unit of 1 - f in the factuality mean
STATEMENT_PENALTY = 0.25


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


def item_stances(evidence: Sequence[dict]) -> dict[str, float]:
    """Stance in [-1, 1] of each evidence item's whole text (the lexicon plus its technical levels,
    read against the latest close of the context), by upper-cased id."""
    close = latest_close(evidence)
    out: dict[str, float] = {}
    for it in evidence:
        if isinstance(it, dict) and isinstance(it.get("id"), str):
            text = str(it.get("text", ""))
            out[it["id"].strip().upper()] = (math.tanh(stance_score(text) + level_score(text, close))
                                             if text and not is_instruction(text) else 0.0)
    return out


def canonical_items(evidence: Sequence[dict], *, k: int = SATURATION) -> dict[str, tuple[str, ...]]:
    """Per section, the items an honest thesis that stops at `k` bullets covers: the min(k, n) items
    with the strongest stance (|stance|), the first listed (the newest) among equals; never an item
    that only instructs the model (`rewards.reading.only_instruction`)."""
    stances = item_stances(evidence)
    by_section: dict[str, list[tuple[float, int, str]]] = {}
    for pos, it in enumerate(evidence):
        # an item that instructs the model is no evidence: an honest thesis covers none
        if isinstance(it, dict) and isinstance(it.get("id"), str) and not only_instruction(str(it.get("text", ""))):
            key = it["id"].strip().upper()
            by_section.setdefault(str(it.get("section", "")), []).append((-round(abs(stances[key]), 9), pos, key))
    return {sec: tuple(key for _, _, key in sorted(rows)[:k]) for sec, rows in by_section.items()}


class LocalJudge:
    """Deterministic triangular judge (see the module docstring for every formula)."""

    name = "local"

    def _passage_stances(self, ctx: JudgeContext) -> list[float]:
        feats = ctx.index.features
        st = feats.get("stance")
        if st is None:
            close = latest_close(ctx.index.evidence)
            st = [math.tanh(stance_score(p.text) + level_score(p.text, close))
                  if p.text and not is_instruction(p.text) else 0.0 for p in ctx.index.passages]
            feats["stance"] = st
        return st

    @staticmethod
    def _expected(ctx: JudgeContext) -> tuple[dict[str, tuple[str, ...]], dict[str, float]]:
        """The expected items of each section (`canonical_items`) and the item stances, per index."""
        feats = ctx.index.features
        hit = feats.get("expected")
        if hit is None:
            hit = feats["expected"] = (canonical_items(ctx.index.evidence), item_stances(ctx.index.evidence))
        return hit

    def _read_bullets(self, thesis: ThesisClaims, ctx: JudgeContext) -> list[tuple[Claim, list[tuple[int, float]]]]:
        """The bullets the judge reads: per section, as many as it has expected items (where an
        honest thesis stops; SATURATION for a section the prompt does not have)."""
        expected = self._expected(ctx)[0]
        seen: dict[str, int] = {}
        out = []
        for cl, cps in zip(thesis.claims, ctx.claim_passages, strict=True):
            if cl.kind != "bullet":
                continue
            rank = seen[cl.section] = seen.get(cl.section, -1) + 1
            if rank < len(expected.get(cl.section, ())) or (cl.section not in expected and rank < SATURATION):
                out.append((cl, cps))
        return out

    def _claim_f(self, claim: Claim, cps: list[tuple[int, float]], ctx: JudgeContext, st: list[float],
                 report: EvidenceReport | None, addressed: frozenset[str] = frozenset()) -> tuple[float, float]:
        """(f_i, c_i) of one claim (module docstring)."""
        # an opinion that copies its evidence states no view of its own (same rule as the reward)
        copied = opinion_copied_share(claim.opinion, ctx.index.grounding) > 0.5
        if claim.kind != "bullet":
            g = self._statement_grounding(claim, ctx, report, addressed)
            e = self._expected_stance(ctx)
            # the statement's verdict (its last sentence with a direction, read as a bullet's opinion)
            # against the stance of the evidence it restates: stating its direction agrees fully,
            # saying nothing loses |e|, saying the opposite 2 |e|, so a stance-free statement never
            # scores above one that states the grounded direction
            c = 0 if copied else verdict_direction(claim.opinion)
            # keyword salad in the verdict: each stance cue past SALAD_CUES takes SALAD_COST off f (f may
            # fall below 0: stacked stance words cost even on a verdict that already earns nothing)
            salad = SALAD_COST * max(0, len(stance_cues(verdict_sentence(claim.opinion))) - SALAD_CUES)
            return g * max(0.0, 1.0 - abs(e) + c * e) - salad, float(c)
        check = report.bullets[claim.ref] if report is not None and claim.ref < len(report.bullets) else None
        if check is not None and check.hallucinated:
            # what the evidence reward calls invented (an id, quote, number, fact, name or time claim,
            # or a quoted instruction) grounds nothing here either
            return 0.0, 0.0
        g = self._grounding(claim, cps, ctx, report) * self._fact_support(claim, cps, ctx)
        e, echo = self._evidence_stance(claim, cps, ctx, st)
        # the reading, not the words: the opinion's own direction (cues it repeats from its items
        # aside, saturated at the first clear direction) against the direction of what it cites
        c = 0 if copied else opinion_direction(claim.opinion, echo)
        unread = bool(claim.citations) and all(self._section(ctx, i) in UNREAD_SECTIONS for i in claim.citations)
        reading = 0 if abs(e) < ITEM_CLEAR or unread else (1 if e > 0 else -1)
        # keyword salad: stance cues past SALAD_CUES add nothing and each costs SALAD_COST of the claim
        g *= max(0.0, 1.0 - SALAD_COST * max(0, len(stance_cues(claim.opinion)) - SALAD_CUES))
        if c == reading:
            return g, float(c)
        # a direction for an item that has none half agrees; none for one that has one, or the
        # opposite one (a contradiction, whatever words it repeats), does not agree
        return (0.5 * g if reading == 0 else 0.0), float(c)

    def _reading(self, bullets: list[tuple[Claim, float, float]], report: EvidenceReport | None,
                 ctx: JudgeContext) -> tuple[list[tuple[float, float]], frozenset[str], list[float]]:
        """The reasoning's reading of the expected items, as (weight, stance) terms of R: an item a
        read bullet grounds weighs that bullet's f with its opinion's stance c; an expected item
        with a stance that no read bullet grounds weighs the mean f with the item's own stance (as
        if read at face value, so leaving it out or swapping it for another item cannot move R).
        Bullets on items the section does not expect weigh in F, never in R. Also returns the items
        the read bullets ground and the stances of the expected items left out (charged in F)."""
        expected, stances = self._expected(ctx)
        grounds = {k: report.bullets[cl.ref].supporting if report is not None else () for k, (cl, _, _) in enumerate(bullets)}
        addressed = frozenset(i for ids in grounds.values() for i in ids)
        mean_f = sum(f for _, f, _ in bullets) / len(bullets) if bullets else 0.0
        terms: list[tuple[float, float]] = []
        omitted: list[float] = []
        for item in (i for ids in expected.values() for i in ids):
            readers = [(f, c) for k, (_, f, c) in enumerate(bullets) if item in grounds[k]]
            if readers and any(f > 0 for f, _ in readers):
                c = sum(c for _, c in readers) / len(readers)
                if c:  # a reading with no direction (a neutral item read as neutral) weighs nothing in R
                    terms.append((sum(f for f, _ in readers) / len(readers), c))
            elif abs(stances[item]) > STANCE_FLOOR:
                omitted.append(stances[item])
                terms.append((mean_f, stances[item]))
        return terms, addressed, omitted

    def judge(self, thesis: ThesisClaims, ctx: JudgeContext) -> Verdict:
        st = self._passage_stances(ctx)
        report = evidence_report(thesis.thesis, ctx.index.grounding) if thesis.thesis is not None else None
        bullets = [(cl, *self._claim_f(cl, cps, ctx, st, report)) for cl, cps in self._read_bullets(thesis, ctx)]
        terms, addressed, omitted = self._reading(bullets, report, ctx)
        f_vals = [f for _, f, _ in bullets]
        n_f = len(f_vals) + OMITTED_WEIGHT * len(omitted)
        F_bullets = sum(f_vals) / n_f if n_f else 0.0
        # a statement outside the bullets can lower F, never raise it: it enters the mean at most at
        # F_bullets, less STATEMENT_PENALTY (1 - f), so reading the grounded evidence less well (an
        # overstated conclusion, stray text with no view of evidence that has one) always costs
        verdicts = []
        for claim, cps in zip(thesis.claims, ctx.claim_passages, strict=True):
            if claim.kind != "bullet":
                f, c = self._claim_f(claim, cps, ctx, st, report, addressed)
                if c * DEFAULT_POSITIONS.get(thesis.decision or "", 0.0) < 0:
                    f = 0.0  # a verdict against the thesis's own decision supports nothing it decides
                f_vals.append(min(f, F_bullets) - STATEMENT_PENALTY * (1.0 - f))
                n_f += 1
                verdicts.append(c)
        F = max(0.0, sum(f_vals) / n_f) if f_vals else 0.0
        position = DEFAULT_POSITIONS.get(thesis.decision or "", None)
        if position is None:
            return Verdict(F, 0.0, 0.0, "no valid decision")
        wsum = sum(w for w, _ in terms)
        R = sum(w * c for w, c in terms) / wsum if wsum > 1e-9 else 0.0
        D = F * (1.0 - abs(R - position) / 2.0)
        if any(c * position < 0 for c in verdicts):
            # a statement whose verdict argues against the decision ("the balance is bearish" over a
            # BUY): the decision does not follow from the reasoning as written, whatever the bullets read
            D = 0.0
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
        """Share of the facts stated by a bullet's opinion (FACT_TERMS, by stem) that its evidence
        holds: the bodies of its cited items, or, when it cites none, its retrieved passages."""
        index = ctx.index
        items = [index.id_to_item[c] for c in claim.citations if c in index.id_to_item]
        texts = [str(index.evidence[i].get("text", "")) for i in items] or [index.passages[p].text for p, _ in cps]
        return fact_support(claim.opinion, texts)

    @staticmethod
    def _statement_grounding(claim: Claim, ctx: JudgeContext, report: EvidenceReport | None,
                             addressed: frozenset[str]) -> float:
        """g of a statement outside the bullets: its evidence-report score (precision of its
        citations against the grounded evidence; 0 if it invents) times the share of its facts that
        the evidence the read bullets ground, or an item it quotes with credit, holds."""
        if report is None or claim.ref >= len(report.statements):
            return 0.0
        grounding = ctx.index.grounding
        pool = set(addressed)
        pool.update(c for c in claim.citations for q in claim.quotes if quote_credited(q, c, grounding))
        texts = [grounding.items[i].text for i in sorted(pool) if i in grounding.items]
        return report.statements[claim.ref].score * fact_support(claim.opinion, texts)

    def _expected_stance(self, ctx: JudgeContext) -> float:
        """The mean stance of the expected items (macro items aside: no reading): the direction of the
        evidence a conclusion weighs, which no choice of bullets can move (hedging, cherry-picking)."""
        hit = ctx.index.features.get("expected_stance")
        if hit is None:
            expected, stances = self._expected(ctx)
            ids = [i for sec, items in expected.items() if sec not in UNREAD_SECTIONS for i in items]
            hit = ctx.index.features["expected_stance"] = sum(stances[i] for i in ids) / len(ids) if ids else 0.0
        return hit

    @staticmethod
    def _context_stance(ctx: JudgeContext, st: list[float]) -> float:
        """Net-to-gross stance of the whole context (sum e / sum |e|, 0 without a stance), per index."""
        E = ctx.index.features.get("context_stance")
        if E is None:
            gross = sum(abs(x) for x in st)
            E = ctx.index.features["context_stance"] = sum(st) / gross if gross > 1e-9 else 0.0
        return E

    @staticmethod
    def _section(ctx: JudgeContext, item_id: str) -> str:
        item = ctx.index.grounding.items.get(item_id)
        return item.section if item is not None else ""

    def _evidence_stance(self, claim: Claim, cps: list[tuple[int, float]], ctx: JudgeContext,
                         st: list[float]) -> tuple[float, str]:
        """(stance of what a bullet reads, the bodies it cites): the mean stance of its cited items'
        whole texts, else of its retrieved passages weighted by score."""
        index = ctx.index
        stances = self._expected(ctx)[1]
        cited = [c for c in claim.citations if c in stances]
        if cited:
            echo = " ".join(str(index.evidence[index.id_to_item[c]].get("text", "")) for c in cited
                            if c in index.id_to_item)
            return sum(stances[c] for c in cited) / len(cited), echo
        if not cps:
            return 0.0, ""
        echo = " ".join(index.passages[p].text for p, _ in cps)
        wsum = sum(max(s, 0.0) for _, s in cps)
        if wsum > 0:
            return sum(max(s, 0.0) * st[p] for p, s in cps) / wsum, echo
        return sum(st[p] for p, _ in cps) / len(cps), echo

    @staticmethod
    def _grounding(claim: Claim, cps: list[tuple[int, float]], ctx: JudgeContext, report: EvidenceReport | None) -> float:
        """g of a bullet in [0, 1]: the mean of the checks that apply, each asked of the evidence
        reward's own checker (`rewards.evidence`: citation precision, word-bounded spans, quantities
        with unit/scale/direction) on the same `EvidenceIndex`, over the items this claim's judge
        input holds; 0 when nothing can be checked."""
        index = ctx.index
        grounding = index.grounding
        checks: list[float] = []
        cited = [c for c in claim.citations if c in grounding.items]
        if claim.citations:
            check = report.bullets[claim.ref] if report is not None and claim.ref < len(report.bullets) else None
            precision = check.precision if check is not None else math.nan
            checks.append(precision if precision == precision else 0.0)
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
        return sum(checks) / len(checks) if checks else 0.0


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
        # a judge that failed is an error of the verifier, counted like any other (re-raised in strict mode)
        record_error("consistency_reward/llm_judge", RuntimeError("the LLM judge gave no valid answer"))
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
    "FACT_TERMS", "JUDGE_SYSTEM", "LEXICON", "NEGATIONS", "JudgeAnswer", "LLMJudge", "LocalJudge", "Verdict",
    "canonical_items", "item_stances", "judge_messages", "make_judge", "stance", "stance_score",
]
