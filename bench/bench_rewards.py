"""Benchmark the deterministic reward stack (structure + evidence + decision + loop) on one core.

Builds synthetic context rows (six sections, four evidence items each, numbers in every text)
and 10,000 ~400-word completions (honest, citation-stuffed, fabricated numbers, wrong quotes,
looping, junk), then scores them the way GRPO does: batches of 64 (8 prompts x 8 generations)
through the four TRL reward functions. The same checks done naively (re-parse the completion for
every reward, rebuild/re-normalise the evidence for every bullet, no caches) are timed on a
subset in the same run. Prints completions/s, peak memory and the ratio.

    python bench/bench_rewards.py [--n 10000] [--naive-n 1000] [--seed 0] [--audit-rows 1000]
    python bench/bench_rewards.py --dump REF.json     # the verifier's scores of every completion
    python bench/bench_rewards.py --check REF.json    # ... must equal REF.json's, float for float

--dump / --check score every completion of the workload (same seed and --n) with the four rewards,
the evidence report's diagnostics (hallucination rate, citation precision, grounding, misread) and the
local consistency judge (s and its three parts), and write them to / compare them with a JSON file:
a speed change must leave every score bit-identical (exit status 1 and the first differences if not).

--audit-rows N also times `thesisgym.evaluate.reward_audit.run_audit` (honest thesis + every mutation family, each
scored with the full stack and the local consistency judge) on N pipeline-built synthetic rows with
--audit-workers processes (default 2), and prints rows x families per second of wall time.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import random
import resource
import statistics
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

from thesisgym.rewards import decision_reward, evidence_reward, loop_penalty, structure_reward  # noqa: E402
from thesisgym.rewards.base import EvidenceIndex, clear_caches  # noqa: E402
from thesisgym.rewards.evidence import (  # noqa: E402
    bullet_count_score,
    check_bullet,
    cuts_measure,
    harmonic_mean,
    item_readings,
)
from thesisgym.rewards.loops import loop_stats  # noqa: E402
from thesisgym.rewards.reading import stance_cues  # noqa: E402
from thesisgym.rewards.structure import structure_score  # noqa: E402
from thesisgym.schema import LABELS, SECTIONS  # noqa: E402
from thesisgym.thesis import extract_numbers, parse_thesis  # noqa: E402

TEMPLATES = {
    "T": [
        "Close {a:.2f}, up {b:.1f}% on the day; volume {c:.1f}M vs 20-day average {d:.1f}M.",
        "SMA20 {a:.2f}, SMA50 {c:.2f}; price is {b:.1f}% above the 20-day average.",
        "RSI(14) {a:.1f}; MACD {b:.2f} above its signal line at {c:.2f}; ATR(14) {d:.2f}.",
        "Bollinger upper band {a:.2f}, lower band {c:.2f}; z-score of close vs 20-day mean {b:.1f}.",
    ],
    "F": [
        "Quarterly revenue ${a:.1f} billion, up {b:.1f}% year over year; EPS ${c:.2f} vs consensus ${d:.2f}.",
        "Gross margin {a:.1f}%, operating cash flow ${c:.1f} billion, share buybacks ${d:.1f} billion.",
        "Guidance calls for services growth of {b:.1f}% next year; cash of ${a:.1f} billion.",
        "Debt to equity {b:.2f}; free cash flow margin {a:.1f}% over the trailing four quarters.",
    ],
    "N": [
        "Company unveils new products at its spring event; analysts expect {b:.1f}% unit growth.",
        "Regulators open probe into fees; potential fine of up to {b:.1f}% of global revenue.",
        "Supplier reports {a:.1f}% rise in component orders for the current quarter.",
        "Shares rally {b:.1f}% after a partnership with a major cloud provider is announced.",
    ],
    "I": [
        "CFO sold {c:.0f} shares at ${a:.2f} under a pre-arranged trading plan.",
        "Director bought {d:.0f} shares at ${a:.2f}, the first open-market purchase in {b:.0f} years.",
        "Insider net selling totals ${b:.1f} million over the past 90 days.",
        "CEO holdings unchanged at {b:.2f} million shares after the latest filing.",
    ],
    "A": [
        "Broker raises price target to ${a:.0f} from ${c:.0f}, rating Overweight.",
        "Another broker reiterates Neutral with a ${a:.0f} target.",
        "Consensus 12-month target ${a:.2f}; {d:.0f} of 42 analysts rate the stock Buy.",
        "A broker downgrades to Hold citing valuation at {b:.1f} times forward earnings.",
    ],
    "M": [
        "CPI rose {b:.1f}% year over year, above the {c:.1f}% forecast.",
        "Fed funds rate held at {b:.2f}%; futures price three cuts this year.",
        "10-year Treasury yield fell to {b:.2f}% from {c:.2f}% a week earlier.",
        "S&P 500 up {b:.1f}% year to date; Nasdaq 100 up {c:.1f}% over the same period.",
    ],
}
# ~240 words of analyst vocabulary, so random opinions repeat about as much as real prose does; views,
# not events or actors (an opinion that names an event no cited item holds is an invention)
WORDS = [
    "the",
    "stock",
    "trend",
    "looks",
    "constructive",
    "while",
    "risks",
    "remain",
    "balanced",
    "and",
    "investors",
    "should",
    "weigh",
    "this",
    "signal",
    "against",
    "valuation",
    "because",
    "momentum",
    "often",
    "fades",
    "after",
    "strong",
    "runs",
    "yet",
    "demand",
    "appears",
    "durable",
    "across",
    "segments",
    "with",
    "margins",
    "holding",
    "up",
    "better",
    "than",
    "feared",
    "sentiment",
    "improving",
    "among",
    "institutions",
    "although",
    "management",
    "guidance",
    "stays",
    "cautious",
    "on",
    "pricing",
    "supply",
    "chains",
    "normalise",
    "competitors",
    "discount",
    "aggressively",
    "consumers",
    "trade",
    "down",
    "retail",
    "flows",
    "chase",
    "breakouts",
    "short",
    "interest",
    "declines",
    "breadth",
    "support",
    "earnings",
    "per",
    "share",
    "carry",
    "growth",
    "slows",
    "capital",
    "spending",
    "rises",
    "cloud",
    "revenue",
    "accelerates",
    "advertising",
    "recovers",
    "hardware",
    "cycles",
    "peak",
    "software",
    "subscriptions",
    "renew",
    "sentiment",
    "scrutinise",
    "fees",
    "litigation",
    "lingers",
    "currency",
    "headwinds",
    "fade",
    "emerging",
    "markets",
    "rebound",
    "inventories",
    "tighten",
    "freight",
    "costs",
    "ease",
    "wages",
    "climb",
    "productivity",
    "improves",
    "leverage",
    "falls",
    "liquidity",
    "ample",
    "credit",
    "spreads",
    "narrow",
    "volatility",
    "compresses",
    "options",
    "skew",
    "flattens",
    "breadth",
    "widens",
    "leadership",
    "rotates",
    "defensives",
    "lag",
    "cyclicals",
    "lead",
    "small",
    "caps",
    "underperform",
    "rates",
    "plateau",
    "inflation",
    "cools",
    "growth",
    "moderates",
    "policy",
    "pivots",
    "investors",
    "reprice",
    "duration",
    "risk",
    "appetite",
    "returns",
    "positioning",
    "looks",
    "crowded",
    "analysts",
    "revise",
    "estimates",
    "upward",
    "downgrades",
    "cluster",
    "targets",
    "converge",
    "insiders",
    "sell",
    "routinely",
    "directors",
    "buy",
    "selectively",
    "executives",
    "hold",
    "stakes",
    "filings",
    "show",
    "patience",
    "boards",
    "favour",
    "repurchases",
    "auditors",
    "sign",
    "off",
    "accounting",
    "remains",
    "conservative",
    "disclosures",
    "improve",
    "transparency",
    "earnings",
    "quality",
    "holds",
    "cash",
    "conversion",
    "strengthens",
    "working",
    "capital",
    "releases",
    "debt",
    "maturities",
    "extend",
    "refinancing",
    "costs",
    "rise",
    "coverage",
    "ratios",
    "stay",
    "healthy",
    "ratings",
    "agencies",
    "affirm",
    "outlooks",
    "stable",
    "upside",
    "case",
    "hinges",
    "execution",
    "downside",
    "case",
    "hinges",
    "recession",
    "odds",
    "base",
    "case",
    "favours",
    "patience",
    "entry",
    "points",
    "matter",
    "sizing",
    "should",
    "stay",
    "modest",
    "stops",
    "belong",
    "below",
    "support",
    "resistance",
    "sits",
    "near",
    "recent",
    "highs",
    "pullbacks",
    "attract",
    "buyers",
    "sellers",
    "exhaust",
    "quickly",
    "volume",
    "confirms",
    "direction",
]


def make_row(rng: random.Random) -> dict:
    evidence = []
    sections = [s for s in SECTIONS if s in set(rng.sample(list(SECTIONS), 4))]  # 4 of 6, prompt order
    for section in sections:
        prefix = SECTIONS[section]
        for k, template in enumerate(TEMPLATES[prefix]):
            text = template.format(
                a=rng.uniform(10, 300), b=rng.uniform(0.5, 30), c=rng.uniform(5, 90), d=rng.uniform(1, 40)
            )
            evidence.append(
                {
                    "id": f"{prefix}{k + 1}",
                    "section": section,
                    "date": "2024-03-08",
                    "source": "synthetic",
                    "text": text,
                    "numbers": extract_numbers(text),
                }
            )
    return {"evidence": evidence, "sections": sections, "label": rng.choice(LABELS)}


def opinion(rng: random.Random, n: int, words: list[str] = WORDS) -> str:
    return " ".join(rng.choice(words) for _ in range(n)).capitalize()


# an honest bullet reads its item the item's way: stance-free words, then the item's own direction (v4.11
# pays a bullet nothing when its opinion reads its quote backwards, so a random stance word is no honest view)
VIEW_WORDS = [w for w in WORDS if not stance_cues(w)]
READS = {1: ", which reads bullish for the shares", -1: ", which reads bearish for the shares", 0: ""}


def quote_of(rng: random.Random, text: str) -> str:
    """4-6 words of `text`, as an honest writer quotes: never ending on a number cut from its scale
    word ("$119.6" of "$119.6 billion"), which verifier v2 does not credit, nor cutting a value from
    what it measures, which v4 does not credit."""
    words = text.split()
    start = rng.randrange(0, max(1, len(words) - 5))
    end = min(len(words), start + rng.randint(4, 6))
    while end < len(words) and words[end - 1].rstrip(".;,")[-1:].isdigit():
        end += 1
    # nor separating a value from what it measures ("price is" of "price is 16.8% above"): v4
    while True:
        quote = " ".join(words[start:end]).strip(".;,")
        if not cuts_measure(quote, text):
            return quote
        if end < len(words):
            end += 1
        elif start > 0:
            start -= 1
        else:
            return quote


def completion(rng: random.Random, row: dict, kind: str) -> str:
    if kind == "junk":
        return opinion(rng, 400)
    by_id = {e["id"]: e for e in row["evidence"]}
    readings = item_readings(EvidenceIndex(row["evidence"]))
    all_ids = "".join(f"[{i}]" for i in by_id)
    parts = ["<think>Weigh the evidence section by section.</think>"]
    for section in row["sections"]:
        prefix = SECTIONS[section]
        bullets = []
        for k in range(4):
            item_id = f"{prefix}{k + 1}"
            quote = quote_of(rng, by_id[item_id]["text"])
            cite = f"[{item_id}]"
            text = opinion(rng, rng.randint(15, 22), VIEW_WORDS) + READS[readings.get(item_id, 0)]
            if kind == "stuffing":
                cite = all_ids
            elif kind == "fabricated" and k == 0:
                text += f" with growth of {rng.uniform(40, 90):.1f}%"
            elif kind == "wrong_quote" and k == 1:
                cite = f"[{prefix}{(k + 1) % 4 + 1}]"
            bullets.append(f'- {text} "{quote}" {cite}')
        if kind == "loop" and section == row["sections"][-1]:
            bullets += [bullets[0]] * 30
        parts.append(f"<{section}>\n" + "\n".join(bullets) + f"\n</{section}>")
    parts.append("<conclusion>" + opinion(rng, 25) + "</conclusion>")
    parts.append(f"<decision>{rng.choice(LABELS)}</decision>")
    return "\n".join(parts)


KINDS = ["honest"] * 12 + ["stuffing"] * 2 + ["fabricated"] * 2 + ["wrong_quote"] * 2 + ["loop", "junk"]
REWARDS = (structure_reward, evidence_reward, decision_reward, loop_penalty)


def batch_columns(chunk: list) -> dict[str, list]:
    """The dataset columns TRL passes a reward for one batch of (completion, row, kind) triples."""
    return {key: [r[key] for _, r, _ in chunk] for key in ("evidence", "sections", "label")}


def naive_scores(text: str, row: dict) -> list[float]:
    """The same checks with no sharing: parse per reward, rebuild the evidence index per bullet."""
    s = structure_score(parse_thesis(text), prompt_sections=row["sections"])
    thesis = parse_thesis(text)
    sections = []
    for section in thesis.sections:
        checks = [check_bullet(b, EvidenceIndex(row["evidence"])).score for b in section.bullets]
        sections.append(
            0.3 * bullet_count_score(len(checks)) + 0.7 * harmonic_mean(checks) if checks else 0.0
        )
    e = harmonic_mean(sections) if sections else 0.0
    d = 1.0 if parse_thesis(text).decision == row["label"] else -1.0
    return [s, e, d, loop_stats(text)[1]]


class _CollectorClock:
    """A gc callback summing the CPU time of the cycle collector's passes."""

    def __init__(self) -> None:
        self.seconds, self.runs, self._start = 0.0, 0, 0.0

    def __call__(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._start = time.process_time()
        else:
            self.seconds += time.process_time() - self._start
            self.runs += 1


def _cpu(fn) -> float:
    start = time.process_time()
    fn()
    return time.process_time() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--naive-n", type=int, default=1_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--audit-rows", type=int, default=0, help="also time the audit on N rows (0: skip)")
    parser.add_argument("--audit-workers", type=int, default=2)
    parser.add_argument("--dump", metavar="PATH", help="write every completion's scores to PATH (JSON) and exit")
    parser.add_argument("--check", metavar="PATH", help="compare every completion's scores with PATH's and exit")
    parser.add_argument(
        "--repeat",
        type=int,
        default=3,
        help="best of N passes (timeit convention; shared machines are noisy)",
    )
    args = parser.parse_args()
    if (args.dump or args.check) and os.environ.get("PYTHONHASHSEED") != "0":
        # one hash seed for dump and check, so that any future sum over a set cannot make them disagree
        os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, "PYTHONHASHSEED": "0"})
    rng = random.Random(args.seed)
    generations, prompts_per_batch = 8, 8
    rows = [make_row(rng) for _ in range(args.n // generations + 1)]
    data = []
    for i in range(args.n):
        row = rows[i // generations]
        kind = rng.choice(KINDS)
        data.append((completion(rng, row, kind), row, kind))
    words = statistics.mean(len(t.split()) for t, _, _ in data)
    print(f"{args.n} completions, mean {words:.0f} words, {len(rows)} prompts x {generations} generations")
    if args.dump or args.check:
        sys.exit(dump_or_check(data, args.seed, args.dump, args.check))

    batch_size = generations * prompts_per_batch
    per_kind: dict[str, list[float]] = {}
    fast_cpu, fast = math.inf, math.inf
    in_gc, all_cpu = _CollectorClock(), 0.0  # CPU time spent in the cycle collector over all passes
    gc.callbacks.append(in_gc)
    for rep in range(max(1, args.repeat)):
        clear_caches()  # every pass starts cold: nothing parsed, no evidence indexed
        start, cpu_start = time.perf_counter(), time.process_time()
        for b in range(0, len(data), batch_size):
            chunk = data[b : b + batch_size]
            completions = [c for c, _, _ in chunk]
            cols = batch_columns(chunk)
            results = [fn(prompts=[None] * len(chunk), completions=completions, **cols) for fn in REWARDS]
            if rep == 0:
                for (_, _, kind), ev in zip(chunk, results[1], strict=True):
                    per_kind.setdefault(kind, []).append(ev)
        fast_cpu = min(fast_cpu, time.process_time() - cpu_start)
        all_cpu += time.process_time() - cpu_start
        fast = min(fast, time.perf_counter() - start)
    fast_rate = len(data) / fast_cpu
    gc.callbacks.remove(in_gc)

    subset = data[: args.naive_n]
    naive_cpu = math.inf
    for _ in range(max(1, args.repeat)):
        cpu_start = time.process_time()
        for text, row, _ in subset:
            naive_scores(text, row)
        naive_cpu = min(naive_cpu, time.process_time() - cpu_start)
    naive_rate = len(subset) / naive_cpu
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    # CPU time of this single-threaded process = "one core", robust to other jobs sharing the machine
    print(
        f"stack (structure+evidence+decision+loop, cached): {fast_rate:,.0f} completions/s per core "
        f"({fast_cpu:.2f} s CPU, {fast:.2f} s wall: {len(data) / fast:,.0f}/s wall)"
    )
    print(
        f"naive (re-parse per reward, re-normalise per bullet): {naive_rate:,.0f} completions/s on {len(subset)}"
    )
    print(
        f"speed-up vs naive: {fast_rate / naive_rate:.1f}x   target >= 2,000/s: {'met' if fast_rate >= 2000 else 'NOT met'}"
    )
    print(f"peak RSS: {peak_mb:.0f} MB")
    print(
        f"cycle collector: {in_gc.runs} passes, {in_gc.seconds / all_cpu:.1%} of the stack's CPU time "
        "(rewards pause it while a batch is scored: rewards/base.py collector_paused)"
    )
    # machine calibration: the same pure-Python loop anywhere, to compare figures across machines
    cal = min(_cpu(lambda: sum(i * i for i in range(1_000_000))) for _ in range(3))
    print(f"calibration: sum(i*i for i in range(10**6)) = {cal * 1000:.0f} ms CPU on this machine")
    print(
        "mean evidence reward by kind: "
        + ", ".join(f"{k} {statistics.mean(v):.3f}" for k, v in sorted(per_kind.items()))
    )
    if args.audit_rows:
        bench_audit(args.audit_rows, args.audit_workers)


def reference_scores(data: list[tuple[str, dict, str]], batch_size: int = 64) -> list[dict[str, float]]:
    """Every score the verifier gives each completion: the four rewards as GRPO batches see them,
    the evidence report's diagnostics and the local consistency judge's s and parts (cold caches)."""
    from thesisgym.consistency import make_consistency_reward
    from thesisgym.rewards.evidence import evidence_report

    clear_caches()
    s_reward = make_consistency_reward(judge="local")
    out: list[dict[str, float]] = []
    for b in range(0, len(data), batch_size):
        chunk = data[b : b + batch_size]
        completions = [c for c, _, _ in chunk]
        cols = batch_columns(chunk)
        results = [fn(prompts=[None] * len(chunk), completions=completions, **cols) for fn in REWARDS]
        s_reward(prompts=[None] * len(chunk), completions=completions, evidence=cols["evidence"])
        for k, (text, row, _) in enumerate(chunk):
            report = evidence_report(parse_thesis(text), EvidenceIndex(row["evidence"]))
            r = s_reward.last_results[k]
            out.append(
                {
                    **{fn.__name__: results[j][k] for j, fn in enumerate(REWARDS)},
                    "report_score": report.score,
                    "hallucination_rate": report.hallucination_rate,
                    "citation_precision": report.citation_precision,
                    "grounding": report.grounding,
                    "misread": report.misread,
                    "n_hallucinated": report.n_hallucinated,
                    "s": r.s,
                    "factuality": r.factuality,
                    "deduction": r.deduction,
                    "consistency": r.consistency,
                }
            )
    return out


def _same(a: float | None, b: float | None) -> bool:
    """Equal floats, bit for bit (nan equals nan; -0.0 is not 0.0)."""
    return repr(a) == repr(b)


def dump_or_check(data: list[tuple[str, dict, str]], seed: int, dump: str | None, check: str | None) -> int:
    """Write the scores (`reference_scores`) to `dump`, or compare them with `check`'s: 0 when equal."""
    start = time.process_time()
    scores = reference_scores(data)
    print(f"scored {len(scores)} completions x {len(scores[0])} scores in {time.process_time() - start:.1f} s CPU")
    if dump:
        with open(dump, "w", encoding="utf-8") as fh:
            json.dump({"seed": seed, "n": len(data), "scores": scores}, fh)
        print(f"wrote {dump}")
        return 0
    with open(check, encoding="utf-8") as fh:
        ref = json.load(fh)
    if ref["seed"] != seed or ref["n"] != len(data):
        print(f"{check} holds seed {ref['seed']}, n {ref['n']}: run with the same --seed and --n")
        return 1
    diffs = [
        (i, key, want, got.get(key))
        for i, (want_row, got) in enumerate(zip(ref["scores"], scores, strict=True))
        for key, want in want_row.items()
        if not _same(want, got.get(key))
    ]
    for i, key, want, got in diffs[:10]:
        print(f"  completion {i} ({data[i][2]}): {key} {want!r} -> {got!r}")
    n_values = sum(len(r) for r in scores)
    print(f"check vs {check}: {len(diffs)} of {n_values} scores differ ({len(scores)} completions)")
    return 1 if diffs else 0


def bench_audit(n_rows: int, workers: int) -> None:
    """Wall time of the audit on `n_rows` demo-like synthetic rows (pipeline-built, as `thesisgym audit` sees them)."""
    from thesisgym.data import generate_market
    from thesisgym.data.synth import SynthConfig
    from thesisgym.dataset.contexts import ContextConfig
    from thesisgym.dataset.splits import SplitConfig, build_splits
    from thesisgym.evaluate.reward_audit import FAMILIES, run_audit
    from thesisgym.experiments.demo import DEMO_CONTEXT

    store = generate_market(SynthConfig(n_tickers=12, n_days=520, seed=0, market="A"))
    cfg = SplitConfig(stride=2, token_budget=800, heldout_tickers=0, seed=0, context=ContextConfig(**DEMO_CONTEXT))
    rows = list(build_splits(store, cfg, show_progress=False)["train"])[:n_rows]
    start = time.perf_counter()
    result = run_audit(rows, workers=workers)
    wall = time.perf_counter() - start
    pairs = sum(r["rows"] for r in result.table)
    print(
        f"audit: {len(rows)} rows x {len(FAMILIES)} families ({pairs:,} applicable mutations + {len(rows)} honest) "
        f"in {wall:.1f} s wall on {workers} worker processes ({pairs / wall:,.0f} mutations/s); "
        f"target < 120 s: {'met' if wall < 120 else 'NOT met'}; families above 1 %: {result.failed(0.01) or 'none'}"
    )


if __name__ == "__main__":
    main()
