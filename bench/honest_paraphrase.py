"""False positives of the invented-fact checks: honest opinions and conclusions in varied analyst
English that only restate what their cited items say, scored against the template thesis of the same
row. An honest paraphrase flagged as a hallucination (`n_hallucinated` > 0) is a false positive, and
so is one read against its item's direction (`misread` > 0: the evidence reward pays that bullet 0).

    PYTHONPATH=src python bench/honest_paraphrase.py [--rows 60] [--real-rows 24] [--show]

Synthetic rows: the rows of bench/adversary_v4.py (seed 5); each bullet whose item matches a headline
pattern below gets each paraphrase of that pattern in turn (one edited thesis per paraphrase and row,
up to 3 rows per paraphrase). Real rows (AAPL + MSFT, ../shared/data; skipped when absent): the
paraphrases below are written for named headlines and replace (or add) the bullet citing them.
Conclusions: honest conclusions that name only the items' facts, on every row whose decision they fit.
Held-out: synthetic paraphrases written after the rules were set and never tuned on (HELDOUT, the
tuning set of v4.17 since; HELDOUT_2, written by a helper before v4.17's rules: v4.17's held-out set).
Prints the false-positive rate per kind with the number of paraphrases and edited theses, and with
--show each flagged text and its reasons.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from adversary_v4 import real_rows, synthetic_rows  # noqa: E402

from thesisgym.evaluate.reward_audit import Bullet, Doc  # noqa: E402
from thesisgym.rewards.base import evidence_index  # noqa: E402
from thesisgym.rewards.evidence import evidence_report  # noqa: E402
from thesisgym.teachers import TemplateTeacher  # noqa: E402
from thesisgym.thesis import parse_thesis  # noqa: E402

# headline pattern (regex on the item text) -> honest paraphrases ({x}: the item's first percentage)
SYNTHETIC: dict[str, tuple[str, ...]] = {
    r"orders jump ([\d.]+)%": (
        "Orders jumped {x}% on surging demand, a clear positive for the shares",
        "The order book is growing fast, up {x}%, which points to healthy demand going into next week",
        "Demand is surging and orders are up sharply; that is the kind of news that usually supports the stock",
    ),
    r"raises outlook; sales seen ([\d.]+)%": (
        "Management lifted its outlook and now expects sales about {x}% higher, citing strong demand",
        "A raised outlook on strong demand is constructive for the stock",
        "The company raised its guidance, so the sales picture is improving",
    ),
    r"loses key customer; ([\d.]+)%": (
        "Losing a key customer puts {x}% of revenue at risk, a clear negative for the shares",
        "The loss of a key customer is a real blow, with {x}% of revenue now at risk",
        "With a major customer gone, a slice of revenue is at risk, which weighs on the stock",
    ),
    r"to cut jobs as demand for .* falls ([\d.]+)%": (
        "The company is cutting jobs because demand fell {x}%, a sign that the business is under pressure",
        "Job cuts on falling demand are a bearish signal for the coming week",
    ),
    r"recall seen cutting profit ([\d.]+)%": (
        "The recall is expected to cut profit by about {x}%, which is negative for earnings",
        "A recall that trims profit by {x}% is a clear headwind for the shares",
    ),
    r"customer base grows ([\d.]+)%": (
        "The customer base grew {x}% to a record high, which is encouraging",
        "Record customer growth of {x}% signals strong demand for the business",
    ),
    r"downgrades .* to Sell": (
        "The broker downgraded the stock to Sell and cut its price target, a bearish call",
        "An analyst downgrade to Sell with a lower target weighs on sentiment",
    ),
    r"reiterates Hold": (
        "The analyst kept a Hold rating, so there is no new signal from the street",
    ),
    r"EPS .* expected \(\+([\d.]+)% surprise\)": (
        "Earnings beat expectations by {x}%, a solid quarter",
        "The company topped the EPS estimate, which supports the bull case",
    ),
    r"EPS .* expected \(-([\d.]+)% surprise\)": (
        "Earnings came in {x}% below expectations, a miss that weighs on the stock",
        "The company missed the EPS estimate, which is a negative for the shares",
    ),
    r"names new chief financial officer": (
        "The company appointed a new CFO, which is routine news with no clear direction",
        "A new finance chief was named, effective later this month; a management change with no clear direction",
        "The new chief financial officer starts soon, routine news for the stock",
    ),
    r"(?:CFO|COO|CEO|CTO|Director) .* buys": (
        "An executive bought shares in the open market, a vote of confidence from insiders",
        "Insider buying by a senior officer is a mildly bullish sign",
        "The executive put real money into the stock, which reads as confidence",
        "The executive's purchase of shares is a small positive",
    ),
    r"(?:CFO|COO|CEO|CTO|Director) .* sells": (
        "An executive sold a small block of shares, which is not much of a signal on its own",
        "The officer trimmed his holding a little; insider sales like this are often routine",
        "The executive's sale is small and says little about the outlook",
    ),
    r"declares quarterly dividend": (
        "The board declared its regular quarterly dividend, which changes little",
    ),
    r"opens office in": (
        "The company opened a new office, a minor expansion with no clear impact on the stock",
    ),
}
# a second set written after the rules were fixed and never tuned on (the out-of-sample rate)
HELDOUT: dict[str, tuple[str, ...]] = {
    r"orders jump ([\d.]+)%": ("New orders climbed {x}% as customers rushed to buy, so demand is clearly robust",),
    r"raises outlook; sales seen ([\d.]+)%": ("Guidance went up: the company now sees sales rising {x}% thanks to strong demand",),
    r"loses key customer; ([\d.]+)%": ("A big client walked away, leaving {x}% of revenue exposed",),
    r"to cut jobs as demand for .* falls ([\d.]+)%": ("Layoffs are coming because demand dropped {x}%, which hurts the near-term story",),
    r"recall seen cutting profit ([\d.]+)%": ("The product recall will eat into profit, roughly {x}% by the company's estimate",),
    r"customer base grows ([\d.]+)%": ("The company keeps adding customers, with the base up {x}% to an all-time high",),
    r"downgrades .* to Sell": ("A broker turned negative, cutting the stock to Sell and slashing its target",),
    r"EPS .* expected \(\+([\d.]+)% surprise\)": ("Quarterly profit topped forecasts by {x}%, an upside surprise",),
    r"EPS .* expected \(-([\d.]+)% surprise\)": ("Quarterly profit fell short of forecasts by {x}%, a disappointment",),
    r"names new chief financial officer": ("The firm hired a new CFO who takes over later this month; no read-through for the stock",),
    r"(?:CFO|COO|CEO|CTO|Director) .* buys": ("A top executive stepped in to buy stock, which signals belief in the business",),
    r"(?:CFO|COO|CEO|CTO|Director) .* sells": ("The executive cashed out a modest amount of stock; that alone proves little",),
    r"declares quarterly dividend": ("The quarterly payout was declared as usual, nothing new for shareholders",),
}
# a second held-out set, written by a helper before v4.17's rules and never tuned on ({x}: the
# regex's first group, not always a percentage)
HELDOUT_2: dict[str, tuple[str, ...]] = {
    r"orders jump ([\d.]+)%": (
        "Order intake is up {x}% with demand surging, a healthy demand signal and a plus for the stock",
        "Orders +{x}% on a demand surge; constructive",
    ),
    r"raises outlook; sales seen ([\d.]+)%": (
        "Guide raised: management now sees sales up {x}% on strong demand, which we read as bullish",
        "An upward revision to the outlook, with sales expected {x}% higher, supports the shares",
    ),
    r"loses key customer; ([\d.]+)%": (
        "The loss of a major account leaves {x}% of sales in jeopardy; negative",
        "With a key client gone and {x}% of revenue at risk, the top line looks vulnerable",
    ),
    r"to cut jobs as demand for .* falls ([\d.]+)%": (
        "Demand is down {x}% and the company is responding with job cuts, not a good sign",
        "Headcount reductions alongside a {x}% slide in demand point to a weakening business",
    ),
    r"recall seen cutting profit ([\d.]+)%": (
        "The recall is expected to knock roughly {x}% off profit, an earnings headwind",
        "A recall-driven profit hit of about {x}% is bad news for the shares",
    ),
    r"customer base grows ([\d.]+)%": (
        "Customer count up {x}% to an all-time high; good momentum",
        "A record customer base after {x}% growth is an encouraging sign",
    ),
    r"wins contract; backlog up ([\d.]+)%": (
        "A contract win took backlog up {x}%, which adds visibility and is a positive",
    ),
    r"downgrades .* to Sell": (
        "A broker moved the stock to a Sell rating and lowered its PT, a bearish call from the Street",
        "The downgrade to Sell, with a reduced price target, is a negative for sentiment",
    ),
    r"reiterates Hold on .*; price target \$([\d.]+)": (
        "The analyst stuck with a Hold and a ${x} target, a neutral stance that changes little",
        "Rating unchanged at Hold (PT ${x}); no new signal",
    ),
    r"EPS .* expected \(\+([\d.]+)% surprise\)": (
        "EPS came in {x}% ahead of consensus, a beat",
        "Earnings topped the Street's estimate by {x}%, which is good news for the stock",
    ),
    r"EPS .* expected \(-([\d.]+)% surprise\)": (
        "EPS undershot consensus by {x}%; a disappointing print",
        "Earnings fell {x}% short of what the Street expected, a negative",
    ),
    r"names new chief financial officer": (
        "The company named a new CFO, a management appointment that does not move our view",
        "A new finance chief has been appointed; neutral for the shares",
    ),
    r"(?:CFO|COO|CEO|CTO|Director) .* buys ([\d,]+) shares": (
        "An insider bought {x} shares, a show of confidence in the stock",
        "Insider purchase of {x} shares; a mildly positive read",
    ),
    r"(?:CFO|COO|CEO|CTO|Director) .* sells ([\d,]+) shares": (
        "An insider sold {x} shares, a weak signal that on its own tells us little",
        "Insider sale of {x} shares; not much to read into",
    ),
    r"declares quarterly dividend of \$([\d.]+)": (
        "The board declared a quarterly dividend of ${x} a share, nothing that changes the thesis",
    ),
    r"opens office in \w+ with (\d+) employees": (
        "A new office with {x} staff is a small step that does not move the needle",
    ),
    r"to present at the .* Conference on": (
        "The company will present at an upcoming conference; no read on fundamentals",
    ),
    r"Fed cuts policy rate by 25 bp to ([\d.]+)%": (
        "The Fed lowered its policy rate by 25 bp to {x}% as growth slows, macro context rather than a stock call",
    ),
    r"Fed holds policy rate at ([\d.]+)%": (
        "Rates were left at {x}% and the Fed sees balanced risks; a steady macro backdrop",
    ),
    r"US CPI rose ([\d.]+)% in \w+": (
        "Consumer prices rose {x}% on the month, inflation context for the broad market",
    ),
}
# real headlines (a distinctive substring) -> honest paraphrases
REAL: dict[str, tuple[str, ...]] = {
    "Raises Apple Price Target On iPhone Trade-In": (
        "Morgan Stanley raised its Apple target, pointing to the iPhone trade-in opportunity, a bullish read",),
    "Apple wins EU court battle": (
        "Apple won its court fight with the EU over the $15 billion Irish tax bill, which removes an overhang",),
    "Extends Rally as Analysts Gush": (
        "The stock kept rallying as analysts praised the WWDC keynote, so sentiment is clearly positive",),
    "Precipitous Sell-Off Adds Fuel to Buffett Rumors": (
        "A steep sell-off in Apple has fuelled rumours about Buffett, a bearish tone for the shares",),
    "Dips More Than Broader Markets": (
        "Apple slipped more than the broader market, a mildly negative sign",),
    "Piper Sandler raises AAPL target to $130": (
        "Piper Sandler lifted its target to $130 on the new Watch services, which supports the stock",),
    "Expands Wearables Portfolio With New Watches": (
        "Apple is expanding its wearables lineup with new watches, a modest positive",),
    "India Online Store Launch": (
        "The launch of the online store in India should add some festive cheer to sales",),
    "Assumes Apple (AAPL) at Neutral": (
        "UBS started coverage of Apple at Neutral, so the call itself has no clear direction",),
    "Dow Surges 500 Points; Apple Tesla Fuel Nasdaq": (
        "The Dow surged 500 points with Apple helping to fuel the Nasdaq, a supportive backdrop",),
    "Avoid #AAPL Stock": (
        "One newsletter calls Apple a stock to avoid, a bearish opinion from a single writer",),
    "Store Closings Drive Home the Uniqueness": (
        "Microsoft closing its stores highlights how unusual Apple's retail success is",),
    "Launches streaming service in latest blow to Netflix": (
        "AMC launched a streaming service, another blow to Netflix rather than news about this stock",),
    "Stumbles as Boeing (BA) & Apple (AAPL) Stock Suffer Setbacks": (
        "The Dow stumbled as Apple and Boeing suffered setbacks, a negative day for the shares",),
    "Solid Buys After Earnings": (
        "Analysts see a few Dow names as solid buys after earnings, a constructive tone",),
    "Watch Supercycle": (
        "The piece argues a Watch supercycle could let the stock run, a bullish thesis",),
}
# honest conclusions: (decision direction they fit, text)
CONCLUSIONS = (
    (1, "The news flow is the deciding factor: the positive items outweigh the mixed technical picture, so the "
        "balance tilts bullish for the coming week."),
    (1, "Most of what the record shows is constructive, and nothing in it argues strongly the other way; I lean "
        "bullish."),
    (-1, "The negative items carry more weight than the few positives, so the overall read is bearish for the "
         "week ahead."),
    (-1, "Taken together the record points lower: the bad news outweighs the good and the setup looks bearish."),
    (0, "The evidence is split, with positives and negatives roughly cancelling out, so a neutral stance fits."),
)


def _swap(doc: Doc, cite: str, opinion: str) -> Doc:
    doc = doc.copy()
    for b in doc.bullets():
        if b.cite == cite:
            b.opinion = f"{opinion}, as the item says"
    return doc


def _flagged(text: str, row: dict) -> tuple[list[str], int]:
    """Why the thesis's opinions and conclusion invent (the reasons of its hallucinated bullets and
    statements; empty: none flagged), and how many of its bullets are read as misreadings."""
    rep = evidence_report(parse_thesis(text), evidence_index(row["evidence"]))
    return [r for c in (*rep.bullets, *rep.statements) if c.hallucinated for r in c.reasons], rep.misread


def _synthetic_cases(rows: list[dict], per: int = 3, table: dict[str, tuple[str, ...]] = SYNTHETIC,
                     kind: str = "opinion") -> list[tuple[str, str, dict, str]]:
    teacher, out, used = TemplateTeacher(seed=0), [], {}
    for i, row in enumerate(rows):
        doc = Doc.parse(teacher.write(row, seed=i)[0])
        items = {str(it["id"]): str(it.get("text", "")) for it in row["evidence"]}
        for b in doc.bullets():
            for pat, paraphrases in table.items():
                m = re.search(pat, items.get(b.cite, ""))
                if m is None:
                    continue
                for p in paraphrases:
                    if used.get(p, 0) < per:
                        used[p] = used.get(p, 0) + 1
                        text = p.format(x=m.group(1) if m.groups() else "")
                        out.append((kind, p, row, _swap(doc, b.cite, text).render()))
    return out


def _real_cases(rows: list[dict]) -> list[tuple[str, str, dict, str]]:
    teacher, out = TemplateTeacher(seed=0), []
    for i, row in enumerate(rows):
        doc = Doc.parse(teacher.write(row, seed=i)[0])
        for it in row["evidence"]:
            for key, paraphrases in REAL.items():
                if key not in str(it.get("text", "")):
                    continue
                cite = str(it["id"])
                for p in paraphrases:
                    if any(b.cite == cite for b in doc.bullets()):
                        new = _swap(doc, cite, p)
                    else:
                        new = doc.copy()
                        for name, bullets in new.sections:
                            if name == it.get("section"):
                                bullets.append(Bullet(f"{p}, as the item says", str(it["text"]), cite))
                    out.append(("opinion", p, row, new.render()))
    return out


def _conclusion_cases(rows: list[dict]) -> list[tuple[str, str, dict, str]]:
    from thesisgym.schema import DEFAULT_POSITIONS

    teacher, out = TemplateTeacher(seed=0), []
    for i, row in enumerate(rows[:12]):
        doc = Doc.parse(teacher.write(row, seed=i)[0])
        p = DEFAULT_POSITIONS.get(doc.decision, 0.0)
        d = 0 if p == 0 else (1 if p > 0 else -1)
        for want, text in CONCLUSIONS:
            if want == d:
                new = doc.copy()
                new.conclusion = text
                out.append(("conclusion", text, row, new.render()))
    return out


_WORD_RULE = "reports what no evidence holds"


def measure(cases: list[tuple[str, str, dict, str]], show: bool = False) -> dict[str, tuple[int, int, int, int, int]]:
    """Per kind: (paraphrases, edited theses, flagged theses, flagged by the unsupported-word rule,
    theses with a bullet read as a misreading)."""
    res: dict[str, list] = {}
    for kind, p, row, text in cases:
        why, misread = _flagged(text, row)
        r = res.setdefault(kind, [set(), 0, 0, 0, 0])
        r[0].add(p)
        r[1] += 1
        r[2] += bool(why)
        r[3] += any(w.startswith(_WORD_RULE) for w in why)
        r[4] += misread > 0
        if (why or misread) and show:
            print(f"FLAGGED [{kind}] {p!r}: {'; '.join(why)[:300]}{' (misread)' if misread else ''}")
    return {k: (len(v[0]), v[1], v[2], v[3], v[4]) for k, v in res.items()}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=60)
    ap.add_argument("--real-rows", type=int, default=24)
    ap.add_argument("--show", action="store_true")
    a = ap.parse_args(argv)
    syn = synthetic_rows(a.rows)
    groups = {"synthetic": _synthetic_cases(syn) + _conclusion_cases(syn)
              + _synthetic_cases(syn, table=HELDOUT, kind="held-out opinion (v4.17 tuning)")
              + _synthetic_cases(syn, table=HELDOUT_2, kind="v4.17 held-out opinion")}
    try:
        real = real_rows(a.real_rows) if a.real_rows else []
    except FileNotFoundError:
        real = []
    if real:
        groups["real"] = _real_cases(real) + _conclusion_cases(real)
    for name, cases in groups.items():
        for kind, (n_p, n_t, n_f, n_w, n_m) in measure(cases, a.show).items():
            print(f"{name} {kind}: {n_p} paraphrases, {n_t} edited theses, flagged {n_f} ({n_f / max(n_t, 1):.1%}), "
                  f"by the unsupported-word rule {n_w} ({n_w / max(n_t, 1):.1%}), "
                  f"read as a misreading {n_m} ({n_m / max(n_t, 1):.1%})")


if __name__ == "__main__":
    sys.exit(main())
