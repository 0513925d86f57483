"""Hand-built context rows with the schema.CONTEXT_COLUMNS shape, for tests and benchmarks.

Why: the training stage must be testable on its own, in seconds, without building a market and its
contexts. These rows look like `build_contexts` output (system + user prompt, evidence items with
ids/dates/sources/numbers, label, forward return and volatility) but are tiny, so a GRPO step on
the `tiny` preset fits a CPU test budget. The evidence is made so the documented rules of
`TemplateTeacher` can reach a sensible decision: bullish rows carry bullish numbers and words.
"""

from __future__ import annotations

import math
import random

from thesisgym.schema import LABEL_TO_ID, LABELS, SECTIONS, SYSTEM_PROMPT

_UP_NEWS = (
    "{co} beats estimates as revenue grows {a}% and margins expand to {b}%",
    "{co} raises full-year guidance after strong demand, shares gain {a}% in early trade",
    "Analysts upgrade {co} citing record orders and {a}% growth in backlog",
    "{co} wins a major contract worth {a} million, boosting its outlook",
)
_DOWN_NEWS = (
    "{co} misses estimates as revenue falls {a}% and margins shrink to {b}%",
    "{co} cuts guidance on weak demand, shares drop {a}% after the warning",
    "Regulators probe {co} over accounting; the stock slides {a}% on the news",
    "{co} loses a key customer, a {a} million hit to annual sales",
)


def render_item(item: dict) -> str:
    """The line a prompt shows for one evidence item: id, date, source, then the text."""
    return f"[{item['id']}] {item['date']} ({item['source']}): {item['text']}"


def render_prompt(evidence: list[dict], sections: list[str], *, ticker: str, asof: str) -> list[dict]:
    """System + user messages for one context, grouped by section in the given order."""
    lines = [f"Ticker: {ticker}. As of the close of {asof}."]
    for sec in sections:
        lines.append(f"## {sec}")
        lines.extend(render_item(it) for it in evidence if it["section"] == sec)
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": "\n".join(lines)}]


def _numbers(*values: float) -> list[float]:
    return [float(v) for v in values]


def toy_row(
    *,
    ticker: str = "SYN000",
    asof: str = "2024-03-01",
    stance: float = 1.0,
    items_per_section: int = 4,
    sections: tuple[str, ...] = ("technical", "fundamentals", "news"),
    seed: int = 0,
    split: str = "train",
) -> dict:
    """One context row. `stance` in [-1, 1] tilts evidence, label and forward return together."""
    if not -1.0 <= stance <= 1.0:
        raise ValueError(f"toy_row: stance must be in [-1, 1], got {stance}")
    unknown = [s for s in sections if s not in SECTIONS]
    if unknown:
        raise ValueError(f"toy_row: unknown sections {unknown}; known: {list(SECTIONS)}")
    rng = random.Random(seed)
    co = f"{ticker} Corp"
    evidence: list[dict] = []
    for sec in sections:
        prefix = SECTIONS[sec]
        for k in range(items_per_section):
            iid = f"{prefix}{k + 1}"
            day = f"2024-02-{20 + k:02d}"
            # each item leans up with probability (1 + stance) / 2, so mild stances give mixed evidence
            item_up = rng.random() < (1 + stance) / 2
            sign = 1.0 if item_up else -1.0
            if sec == "technical":
                close = round(100 + rng.uniform(-5, 5), 2)
                sma = round(close - sign * rng.uniform(1.0, 3.0), 2)
                rsi = round(50 + sign * rng.uniform(8, 20), 1)
                ret = round(sign * rng.uniform(1.0, 5.0), 2)
                text = f"Close {close}, SMA20 {sma}, RSI14 {rsi}, 10-day return {ret}%"
                nums = _numbers(close, 20, sma, 14, rsi, 10, ret)
                src = "prices"
            elif sec == "fundamentals":
                eps = round(sign * rng.uniform(1, 9), 1)
                growth = round(sign * rng.uniform(1, 7), 1)
                text = f"Quarterly EPS surprise {eps}% versus consensus; revenue growth {growth}% year over year"
                nums = _numbers(eps, growth)
                src = "10-Q"
            else:
                a = round(rng.uniform(3, 15), 1)
                b = round(rng.uniform(10, 30), 1)
                tmpl = rng.choice(_UP_NEWS if item_up else _DOWN_NEWS)
                text = tmpl.format(co=co, a=a, b=b)
                nums = _numbers(*[x for x in (a, b) if f"{x}" in text])
                src = rng.choice(("Reuters", "Bloomberg", "synthetic-wire"))
            evidence.append({"id": iid, "section": sec, "date": day, "source": src, "text": text, "numbers": nums})
    label = LABELS[min(4, max(0, int(round(2 + 2 * stance))))]
    fwd_vol = 0.04
    fwd_return = round(0.03 * stance + rng.uniform(-0.005, 0.005), 5)
    prompt = render_prompt(evidence, list(sections), ticker=ticker, asof=asof)
    return {
        "prompt": prompt,
        "prompt_text": "\n\n".join(m["content"] for m in prompt),
        "evidence": evidence,
        "sections": list(sections),
        "ticker": ticker,
        "asof": asof,
        "market": "A",
        "variation": 0,
        "label": label,
        "label_id": LABEL_TO_ID[label],
        "composite": float(stance * 2),
        "fwd_return": float(fwd_return),
        "fwd_vol": fwd_vol,
        "true_expected_return": math.nan,
        "split": split,
    }


def toy_rows(n: int = 8, *, seed: int = 0, **kwargs) -> list[dict]:
    """`n` rows with stances spread over [-1, 1] (so every label appears) and distinct tickers/dates."""
    if n <= 0:
        raise ValueError(f"toy_rows: n must be positive, got {n}")
    rows = []
    for i in range(n):
        stance = -1.0 + 2.0 * i / max(1, n - 1)
        rows.append(toy_row(ticker=f"SYN{i % 5:03d}", asof=f"2024-03-{1 + i % 28:02d}", stance=round(stance, 3),
                            seed=seed * 1000 + i, **kwargs))
    return rows


def toy_dataset(n: int = 8, *, seed: int = 0, **kwargs):
    """The rows of `toy_rows` as a `datasets.Dataset`."""
    from datasets import Dataset

    return Dataset.from_list(toy_rows(n, seed=seed, **kwargs))


_COPY_WORDS = (
    "revenue", "margin", "orders", "backlog", "demand", "supply", "guidance", "outlook", "dividend",
    "contract", "plant", "launch", "recall", "probe", "merger", "rating", "target", "cloud", "chip",
    "battery", "retail", "freight", "lithium", "copper", "solar", "drug", "trial", "patent", "lawsuit",
    "buyback", "export", "tariff",
)


def copy_task_rows(n: int, *, items: int = 3, quote_words: int = 4, seed: int = 0) -> list[dict]:
    """Rows of the smallest grounding task: quote the first words of the cited news item.

    Each row has `items` news items of random words with one percentage; the completion cites one
    item and quotes its first `quote_words` words (the percentage among them), so a policy scores only by copying from the
    prompt (the words are random, nothing can be memorised). A regression guard for the copy
    ability of a small model and its tokenizer; conversational prompt/completion plus the columns
    the verifier reads (evidence, sections, label).
    """
    if n <= 0 or items <= 0 or quote_words <= 0:
        raise ValueError(f"copy_task_rows: n, items and quote_words must be positive, got {n}, {items}, {quote_words}")
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        evidence = []
        for k in range(items):
            words = [rng.choice(_COPY_WORDS) for _ in range(quote_words + 1)]
            # inside the quoted words: a quote must keep its value (the verifier's meaningful unit)
            words.insert(rng.randint(1, max(1, quote_words - 1)), f"{rng.randint(1, 99)}.{rng.randint(0, 9)}%")
            evidence.append({"id": f"N{k + 1}", "section": "news", "date": f"2024-02-{10 + k:02d}", "source": "wire",
                             "text": " ".join(words), "numbers": []})
        user = "## news\n" + "\n".join(f"[{e['id']}] {e['date']} | {e['source']} | {e['text']}" for e in evidence)
        cited = evidence[rng.randrange(items)]
        quote = " ".join(cited["text"].split()[:quote_words])
        completion = f'<news>\n- The news item says [{cited["id"]}] "{quote}"\n</news>\n<decision>HOLD</decision>'
        rows.append({"prompt": [{"role": "user", "content": user}],
                     "completion": [{"role": "assistant", "content": completion}],
                     "evidence": evidence, "sections": ["news"], "label": "HOLD"})
    return rows
