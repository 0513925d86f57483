"""Trade-R1 consistency verifier: retrieval, local/LLM judges, the TRL reward.

Contexts are built here with a clear stance (bullish or bearish items plus neutral filler), so the
expected order of the three thesis kinds is known: honest > decision contradicts its own claims >
claims contradict the evidence.
"""

from __future__ import annotations

import json
import math
import os
import random
import sys
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from thesisgym.consistency import (  # noqa: E402
    BM25Retriever,
    ConsistencyVerifier,
    EmbeddingRetriever,
    LLMJudge,
    combine_scores,
    make_consistency_reward,
    split_claims,
    stance,
)
from thesisgym.schema import SECTIONS  # noqa: E402

BULL = {
    "fundamentals": ["Quarterly EPS of {a} beats consensus estimates by {p}% as revenue growth accelerates to {g}%",
                     "Management raises guidance for the full year after record orders of {a} million"],
    "news": ["{t} shares surge {p}% after the company wins a contract worth {a} million",
             "{t} rallies as demand for its products improves across all regions"],
    "analyst": ["Broker upgrades {t} to outperform with the price target raised to {a}",
                "Analysts turn bullish on {t} citing margin expansion of {p}%"],
    "insider": ["Insider buying: a director bought shares worth {a} thousand dollars",
                "The chief executive purchases {a} thousand shares in the open market"],
    "technical": ["Close {a} is above the 20-day SMA {b} and the 5-day return is +{p}% in an uptrend",
                  "Price breakout to a new high at {a} with strong momentum"],
}
BEAR = {
    "fundamentals": ["Quarterly EPS of {a} misses consensus estimates by {p}% as revenue declines {g}%",
                     "Management cuts guidance for the full year after weak orders of {a} million"],
    "news": ["{t} shares plunge {p}% after the company loses a contract worth {a} million",
             "{t} slumps as demand for its products deteriorates across all regions"],
    "analyst": ["Broker downgrades {t} to underperform with the price target cut to {a}",
                "Analysts turn bearish on {t} citing margin pressure of {p}%"],
    "insider": ["Insider selling: a director sold shares worth {a} thousand dollars",
                "The chief executive sells {a} thousand shares in the open market"],
    "technical": ["Close {a} is below the 20-day SMA {b} and the 5-day return is -{p}% in a downtrend",
                  "Price breakdown to a new low at {a} with weak momentum"],
}
NEUTRAL = ["The company will hold its annual meeting on May {d} at its headquarters",
           "Trading volume was {a} thousand shares on the session",
           "The board appointed a new company secretary effective June {d}"]
BULL_OPINIONS = ["This is a clearly bullish signal that points to more upside for the shares in the coming weeks",
                 "We read this as a strong positive for the stock and a tailwind for the price",
                 "A favorable development that supports an optimistic view on the shares"]
BEAR_OPINIONS = ["This is a clearly bearish signal that points to more downside for the shares in the coming weeks",
                 "We read this as a strong negative for the stock and a headwind for the price",
                 "An unfavorable development that supports a pessimistic view on the shares"]


def make_context(rng: random.Random, *, direction: int, n_items: int, ticker: str = "SYN001") -> list[dict]:
    """Evidence items: ~70 % of the given direction, ~20 % neutral, ~10 % opposite."""
    pool_main, pool_opp = (BULL, BEAR) if direction > 0 else (BEAR, BULL)
    counters = {s: 0 for s in SECTIONS}
    items = []
    for _ in range(n_items):
        r = rng.random()
        section = rng.choice(list(pool_main))
        if r < 0.7:
            tmpl = rng.choice(pool_main[section])
        elif r < 0.9:
            tmpl, section = rng.choice(NEUTRAL), rng.choice(["news", "macro"])
        else:
            tmpl = rng.choice(pool_opp[section])
        text = tmpl.format(t=ticker, a=round(rng.uniform(5, 500), 1), b=round(rng.uniform(5, 500), 1),
                           p=round(rng.uniform(1, 20), 1), g=round(rng.uniform(1, 30), 1), d=rng.randint(1, 28))
        counters[section] += 1
        from thesisgym.thesis import extract_numbers

        items.append({"id": f"{SECTIONS[section]}{counters[section]}", "section": section, "date": "2024-03-01",
                      "source": "synthetic-wire", "text": text, "numbers": extract_numbers(text)})
    return items


def make_thesis(rng: random.Random, evidence: list[dict], *, claims: int, decision: str,
                max_bullets: int = 12) -> str:
    """Bullets on the items whose stance has sign `claims` ... opinions say `claims` direction.

    claims=+1/-1: the opinion's direction; each bullet is about an item of the *evidence's* main
    direction (so claims=-direction reads the evidence backwards)."""
    overall = np.sign(sum(stance(i["text"]) for i in evidence))
    main = [it for it in evidence if np.sign(stance(it["text"])) == overall]
    picks = rng.sample(main, min(max_bullets, len(main)))
    by_section: dict[str, list[str]] = {}
    for it in picks:
        words = it["text"].split()
        start = rng.randint(0, max(0, len(words) - 6))
        quote = " ".join(words[start : start + rng.randint(5, 8)])
        opinion = rng.choice(BULL_OPINIONS if claims > 0 else BEAR_OPINIONS)
        by_section.setdefault(it["section"], []).append(f'- {opinion}: "{quote}" [{it["id"]}]')
    body = "\n".join(f"<{s}>\n" + "\n".join(b) + f"\n</{s}>" for s, b in by_section.items())
    concl = ("Overall the evidence is bullish and we expect upside." if claims > 0
             else "Overall the evidence is bearish and we expect downside.")
    return f"{body}\n<conclusion>{concl}</conclusion>\n<decision>{decision}</decision>"


BUYS, SELLS = ("BUY", "STRONG_BUY"), ("SELL", "STRONG_SELL")


def three_theses(rng: random.Random, evidence: list[dict], direction: int) -> dict[str, str]:
    same, opp = (BUYS, SELLS) if direction > 0 else (SELLS, BUYS)
    return {
        "honest": make_thesis(rng, evidence, claims=direction, decision=rng.choice(same)),
        "decision_contradicts_claims": make_thesis(rng, evidence, claims=direction, decision=rng.choice(opp)),
        "claims_contradict_evidence": make_thesis(rng, evidence, claims=-direction, decision=rng.choice(opp)),
        "claims_contradict_evidence_decision_ok": make_thesis(rng, evidence, claims=-direction,
                                                              decision=rng.choice(same)),
    }


# --- unit pieces ---------------------------------------------------------------------------------
def test_stance_lexicon_negation_and_signed_numbers():
    assert stance("EPS beats estimates") > 0.5
    assert stance("EPS did not beat estimates") < -0.5
    assert stance("Broker downgrades the stock") < -0.5
    assert stance("insider buying continues") > 0.5 and stance("insider selling continues") < -0.5
    assert stance("return of +4.2% this week") > 0 and stance("return of -4.2% this week") < 0
    assert stance("the annual meeting is on May 3") == 0.0
    # "record" reads bullish as an adjective only, not as the noun ("the record shows")
    assert stance("record orders from a new customer") > 0.5 and stance("a record high") > 0.5
    assert stance("because the record shows it") == 0.0 == stance("part of the record for the period")


def test_split_claims_uses_the_thesis_parser():
    t = split_claims('<news>\n- Good "rally of shares" [N1]\n- Bad [N2]\n</news>\n<conclusion>ok</conclusion>\n'
                     "<decision>BUY</decision>")
    assert [c.kind for c in t.claims] == ["bullet", "bullet", "conclusion"]
    assert t.claims[0].citations == ("N1",) and t.claims[0].quotes == ("rally of shares",)
    assert t.decision == "BUY"


def test_cited_ids_always_reach_the_judge_context():
    rng = random.Random(0)
    ev = make_context(rng, direction=1, n_items=40)
    target = ev[-1]["id"]
    v = ConsistencyVerifier(top_k=0, decision_k=0)
    thesis, ctx = v.prepare(f"<news>\n- unrelated words entirely [{target}]\n</news><decision>HOLD</decision>", ev)
    assert [ctx.index.passages[p].item_id for p in ctx.selected] == [target]


def test_retrieval_finds_the_relevant_item_and_compresses():
    rng = random.Random(1)
    ev = make_context(rng, direction=1, n_items=45)
    ev.append({"id": "N99", "section": "news", "date": "2024-03-01", "source": "wire",
               "text": "Regulators open a probe into the zeppelin division accounting", "numbers": []})
    v = ConsistencyVerifier(top_k=1, decision_k=0)
    _, ctx = v.prepare("<news>\n- The zeppelin division accounting probe worries us\n</news>"
                       "<decision>SELL</decision>", ev)
    assert ctx.claim_passages[0][0][0] == len(ctx.index.passages) - 1
    assert ctx.compression > 5


def test_bm25_scores_equal_bm25s_own_scores():
    import bm25s

    from thesisgym.consistency.retrieval import tokenize

    ev = [{"id": f"N{i}", "text": t, "numbers": []} for i, t in enumerate(
        ["EPS beats estimates by 12%", "shares plunge after guidance cut", "insider buying of 10,000 shares",
         "the annual meeting is in May", "beats beats estimates"])]
    queries = ["eps beats", "guidance cut plunge shares shares", "", "the of", "insider buying beats 12"]
    r = BM25Retriever()
    got = r.scores(r.index(ev), queries)
    bm = bm25s.BM25()
    bm.index([tokenize(x["text"]) for x in ev], show_progress=False)
    for q, row in zip(queries, got, strict=True):
        toks = [t for t in tokenize(q) if t in bm.vocab_dict]
        want = bm.get_scores(toks) if toks else np.zeros(len(ev))
        np.testing.assert_allclose(row, want, rtol=1e-6)


def test_bm25_index_is_built_once_per_evidence_list():
    rng = random.Random(2)
    ev = make_context(rng, direction=1, n_items=20)
    r = BM25Retriever()
    a = r.index(ev)
    b = r.index([dict(x) for x in ev])  # equal content, new objects (as TRL batches deliver them)
    assert a is b
    assert r.index(ev[:-1]) is not a


def test_embedding_retriever_with_a_plugged_encoder():
    vocab = ["beats", "misses", "zeppelin", "probe", "dividend"]

    def encoder(texts):  # a bag-of-keywords "embedding": enough to test the plumbing without a model
        return np.array([[t.lower().count(w) + 1e-3 for w in vocab] for t in texts], dtype=float)

    ev = [{"id": "N1", "text": "Company beats estimates", "numbers": []},
          {"id": "N2", "text": "A zeppelin probe begins", "numbers": []}]
    v = ConsistencyVerifier(retriever=EmbeddingRetriever(encoder=encoder), top_k=1, decision_k=0)
    _, ctx = v.prepare("<news>\n- the zeppelin probe is bad\n</news><decision>SELL</decision>", ev)
    assert ctx.claim_passages[0][0][0] == 1
    with pytest.raises(ValueError):
        EmbeddingRetriever()


def test_combine_options():
    assert combine_scores(1.0, 0.5, 0.0, "mean") == pytest.approx(0.5)
    assert combine_scores(1.0, 0.5, 0.0, "min") == 0.0
    assert combine_scores(1.0, 1.0, 0.125, "geometric") == pytest.approx(0.5)
    with pytest.raises(ValueError):
        ConsistencyVerifier(combine="max")


# --- the ordering on many contexts ------------------------------------------------------------------
def test_local_judge_ranks_honest_over_contradictions_on_many_contexts():
    rng = random.Random(42)
    v = ConsistencyVerifier()
    n, wins = 200, {"honest>decision": 0, "decision>claims": 0, "honest>claims_ok_decision": 0}
    for _ in range(n):
        direction = rng.choice([1, -1])
        ev = make_context(rng, direction=direction, n_items=rng.randint(15, 45))
        th = three_theses(rng, ev, direction)
        s = {k: r.s for k, r in zip(th, v.score_batch(list(th.values()), [ev] * len(th)), strict=False)}
        wins["honest>decision"] += s["honest"] > s["decision_contradicts_claims"]
        wins["decision>claims"] += s["decision_contradicts_claims"] > s["claims_contradict_evidence"]
        wins["honest>claims_ok_decision"] += s["honest"] > s["claims_contradict_evidence_decision_ok"]
    rates = {k: w / n for k, w in wins.items()}
    assert all(r >= 0.95 for r in rates.values()), rates


def test_parts_move_the_expected_way():
    rng = random.Random(7)
    ev = make_context(rng, direction=1, n_items=30)
    th = three_theses(rng, ev, 1)
    r = dict(zip(th, ConsistencyVerifier().score_batch(list(th.values()), [ev] * 4), strict=False))
    honest, dec, cl = r["honest"], r["decision_contradicts_claims"], r["claims_contradict_evidence"]
    # this honest thesis picks its items at random, so it leaves ~14 expected items with a stance
    # uncovered (OMITTED_WEIGHT each in F; read at face value in R, which pulls R toward the
    # evidence's own mix), hence < 0.7; quotes that cut a number from its unit are true but not
    # credited (0.5, the reward's own rule)
    assert honest.factuality > 0.5 and honest.deduction > 0.35 and honest.consistency > 0.6
    # the same kind of claims on other random items: about the same factuality, less deduction
    assert dec.factuality == pytest.approx(honest.factuality, abs=0.15) and dec.deduction < honest.deduction
    # E is the net stance of the whole context (+0.43 on these ~70 % bullish items), so a SELL loses
    # ~0.18 of consistency against the STRONG_BUY, and reading the evidence backwards loses more
    assert dec.consistency < honest.consistency - 0.15 and cl.consistency < dec.consistency
    assert cl.factuality < 0.3 and cl.deduction < 0.3
    assert 0.0 <= cl.s <= dec.s <= honest.s <= 1.0


def test_hallucinated_citations_and_numbers_lower_factuality():
    rng = random.Random(3)
    ev = make_context(rng, direction=1, n_items=20)
    good = make_thesis(rng, ev, claims=1, decision="BUY")
    fake_ids = good.replace("[N", "[N9").replace("[F", "[F9")
    fake_nums = "<news>\n- Shares surge 999.9% on a bullish 777 million deal [N1]\n</news><decision>BUY</decision>"
    v = ConsistencyVerifier()
    assert v.score(fake_ids, ev).factuality < v.score(good, ev).factuality
    assert v.score(fake_nums, ev).factuality < 0.7


def _claim_grounding(v: ConsistencyVerifier, bullet: str, ev: list[dict], section: str = "fundamentals") -> float:
    from thesisgym.consistency import LocalJudge
    from thesisgym.rewards.evidence import evidence_report

    thesis, ctx = v.prepare(f"<{section}>\n{bullet}\n</{section}><decision>BUY</decision>", ev)
    report = evidence_report(thesis.thesis, ctx.index.grounding)
    return LocalJudge._grounding(thesis.claims[0], ctx.claim_passages[0], ctx, report)


def test_judge_grounds_claims_with_the_evidence_rewards_checker():
    """Quotes and numbers are checked by rewards.evidence on the rewards' own EvidenceIndex: exact
    word-bounded spans, numbers with their direction, unit and scale (the old judge ignored signs)."""
    from thesisgym.rewards.base import evidence_index

    ev = [{"id": "F1", "section": "fundamentals", "date": "2024-03-01", "source": "x",
           "text": "Revenue rose 3.2% to $20.75 million as demand for cloud services improved"},
          {"id": "N1", "section": "news", "date": "2024-03-14", "source": "x", "text": "ACME opens an office in Denver"}]
    v = ConsistencyVerifier()
    _, ctx = v.prepare("<news>\n- x [N1]\n</news><decision>BUY</decision>", ev)
    assert ctx.index.grounding is evidence_index(ev)  # the very index the evidence reward reads
    g = lambda b: _claim_grounding(v, b, ev)  # noqa: E731
    assert g('- A good quarter "demand for cloud services improved" [F1]') == 1.0
    # a false quote: the citation supports nothing (precision 0), the quote is no span (0)
    assert g('- A good quarter "demand for cloud services worsened" [F1]') == 0.0
    assert g('- A good quarter "Revenue rose 3.2% to $20.75" [F1]') == 0.75  # true span, cuts "million"
    assert g('- Sales rose 3.2% "demand for cloud services improved" [F1]') == 1.0
    assert g('- Sales fell 3.2% "demand for cloud services improved" [F1]') == pytest.approx(2 / 3)
    assert g('- Sales hit $20.75 billion "demand for cloud services improved" [F1]') == pytest.approx(2 / 3)
    # an unknown id (0); the quote and number are found only in an item retrieved, not cited (0.5, 1)
    assert g('- Sales rose 3.2% "demand for cloud services improved" [F7]') == pytest.approx(0.5)


def test_facts_absent_from_the_evidence_do_not_count_as_agreeing():
    ev = [{"id": f"N{i}", "section": "news", "date": "2024-03-01", "source": "x", "text": t} for i, t in enumerate([
        "ACME beats estimates as cloud demand surges", "ACME shares rally after a strong quarter",
        "ACME wins a large order from a new customer in Asia"], 1)]
    quote = '"ACME beats estimates as cloud demand surges" [N1]'
    theses = {
        "honest": f"- A bullish sign that argues for upside in the shares {quote}",
        "fact_in_evidence": f"- A bullish sign: the company beats estimates, which argues for upside {quote}",
        "invented": f"- A bullish sign: the chief executive resigned and a regulator approved a product {quote}",
        "record_orders": f"- A bullish sign: record orders from a new customer argue for upside {quote}",
    }
    v = ConsistencyVerifier()
    r = {k: v.score(f"<news>\n{b}\n</news><decision>BUY</decision>", ev) for k, b in theses.items()}
    assert r["fact_in_evidence"].factuality == pytest.approx(r["honest"].factuality, abs=0.05)
    # N1 holds none of these facts (N3 holds the order and the customer, but N1 is what is cited)
    assert r["invented"].factuality < 0.5 * r["honest"].factuality and r["invented"].s < r["honest"].s
    assert r["record_orders"].factuality < 0.5 * r["honest"].factuality
    moved = theses["record_orders"].replace("[N1]", "[N3]").replace(quote.split(" [")[0],
                                                                      '"ACME wins a large order from a new customer"')
    assert v.score(f"<news>\n{moved}\n</news><decision>BUY</decision>", ev).factuality > r["record_orders"].factuality


def test_indicator_levels_have_a_direction_and_a_flipped_reading_loses():
    from thesisgym.consistency.judges import latest_close, level_score

    ev = [{"id": "T1", "section": "technical", "date": "2024-03-08", "source": "indicators", "text": "SMA(50) 40.27"},
          {"id": "T2", "section": "technical", "date": "2024-03-08", "source": "indicators", "text": "RSI(14) 66.0"},
          {"id": "T3", "section": "technical", "date": "2024-03-08", "source": "indicators",
           "text": "z-score(20) of close 0.80"},
          {"id": "T4", "section": "technical", "date": "2024-03-08", "source": "prices",
           "text": "open 44.20 high 45.30 low 44.00 close 45.10 volume 1000 change +0.40%"},
          {"id": "T5", "section": "technical", "date": "2024-03-07", "source": "prices",
           "text": "open 39.00 high 39.50 low 38.00 close 38.50 volume 1000 change -0.30%"}]
    assert latest_close(ev) == 45.10  # the latest bar's close, not the z-score's "of close 0.80"
    assert level_score("SMA(50) 40.27", 45.10) > 0 > level_score("SMA(50) 40.27", 38.5)
    assert level_score("RSI(14) 66.0") > 0 > level_score("RSI(14) 31.5") and level_score("RSI(14) 50") == 0
    assert level_score("MACD(12,26,9) line -2.2 signal -2.3 histogram -0.1") < 0
    assert level_score("Close 110.0, SMA20 100.0, RSI14 40") == pytest.approx(0.75 - 0.5)  # periods are no levels
    v = ConsistencyVerifier()
    read = {lean: "\n".join(f'- The technical picture {lean} for the shares "{it["text"]}" [{it["id"]}]'
                             for it in ev[:2]) for lean in ("looks constructive", "looks worrying")}
    s = {k: v.score(f"<technical>\n{b}\n</technical><decision>BUY</decision>", ev).s for k, b in read.items()}
    assert s["looks constructive"] > s["looks worrying"] + 0.1


# --- the TRL reward ---------------------------------------------------------------------------------------
def test_reward_signature_name_batching_and_logging():
    rng = random.Random(5)
    ev = make_context(rng, direction=-1, n_items=25)
    th = three_theses(rng, ev, -1)
    logged: dict[str, float] = {}
    fn = make_consistency_reward()
    other = make_consistency_reward(name="min", combine="min")
    assert fn.__name__ == "consistency_reward" and other.__name__ == "consistency_reward_min"
    completions = [[{"role": "assistant", "content": t}] for t in th.values()]
    out = fn(prompts=[[{"role": "user", "content": "x"}]] * 4, completions=completions, evidence=[ev] * 4,
             label=["SELL"] * 4, log_metric=lambda k, v: logged.__setitem__(k, v))
    assert len(out) == 4 and all(isinstance(x, float) and 0.0 <= x <= 1.0 for x in out)
    assert out[0] > out[1] > out[2]
    assert {"consistency/factuality", "consistency/deduction", "consistency/consistency"} <= set(logged)
    assert fn(prompts=[], completions=[], evidence=[]) == []


@pytest.mark.parametrize("completion", ["", None, 12, "<decision>BUY", "x" * 100_000, [{"role": "user"}],
                                        "<news>\n- [N1] [Q7] \"\"\n</news><decision>SELL</decision>"])
def test_reward_never_raises(completion):
    ev = make_context(random.Random(9), direction=1, n_items=10)
    fn = make_consistency_reward()
    out = fn(prompts=[None], completions=[completion], evidence=[ev])
    assert len(out) == 1 and 0.0 <= out[0] <= 1.0
    assert fn(prompts=[None], completions=[completion], evidence=None) == [0.0]
    assert fn(prompts=[None], completions=[completion], evidence=[[{"bad": 1}]]) == [0.0]
    assert 0.0 <= fn(prompts=[None], completions=[completion], evidence=[[]])[0] <= 1.0


def test_reward_plugs_into_make_combined_reward():
    import thesisgym.rewards as rewards

    rng = random.Random(11)
    ev = make_context(rng, direction=1, n_items=20)
    th = three_theses(rng, ev, 1)
    combined = rewards.make_combined_reward(kind="fsr", consistency=make_consistency_reward())
    out = combined(prompts=[None] * 2, completions=[th["honest"], th["claims_contradict_evidence"]],
                   evidence=[ev] * 2, sections=[["news"]] * 2, label=["BUY"] * 2, fwd_return=[0.02] * 2,
                   fwd_vol=[0.03] * 2)
    assert len(out) == 2 and out[0] > out[1]


# --- the LLM judge against a real HTTP server -----------------------------------------------------------
sys.path.insert(0, str(Path(__file__).resolve().parent))  # works under any pytest import mode
from test_llm import fake_openai, make_client  # noqa: E402,F401  (the fake server fixture is shared)


@pytest.fixture
def server(fake_openai):  # noqa: F811
    fake_openai.reset()
    return fake_openai


def _verdict(f, d, c):
    return json.dumps({"factuality": f, "deduction": d, "consistency": c, "rationale": "scripted"})


def test_llm_judge_scores_and_sees_only_the_compressed_context(server, tmp_path):
    server.default = ("ok", _verdict(0.9, 0.6, 0.3))
    rng = random.Random(13)
    ev = make_context(rng, direction=1, n_items=45)
    th = make_thesis(rng, ev, claims=1, decision="BUY", max_bullets=4)
    judge = LLMJudge(make_client(server, tmp_path))
    v = ConsistencyVerifier(judge=judge)
    r = v.score(th, ev)
    assert (r.factuality, r.deduction, r.consistency, r.source) == (0.9, 0.6, 0.3, "llm")
    assert r.s == pytest.approx(0.6)
    user = server.requests[0]["messages"][-1]["content"]
    shown = sum(f"[{it['id']}]" in user.split("CLAIMS:")[0] for it in ev)
    assert 0 < shown < len(ev) / 3
    assert r.compression > 3


def test_llm_judge_batch_concurrent_cached_and_fallbacks(server, tmp_path):
    rng = random.Random(17)
    ev = make_context(rng, direction=1, n_items=20)
    th = three_theses(rng, ev, 1)
    texts = list(th.values())

    def responder(body):
        user = body["messages"][-1]["content"]
        if "DECISION: SELL" in user or "DECISION: STRONG_SELL" in user:
            return ("ok", "{broken json")
        return ("ok", _verdict(0.8, 0.8, 0.8))

    server.responder = responder
    client = make_client(server, tmp_path)
    reward = make_consistency_reward(judge="llm", client=client, fallback=0.5)
    out = reward(prompts=[None] * 4, completions=texts, evidence=[ev] * 4)
    dec = [split_claims(t).decision for t in texts]
    for s, d in zip(out, dec, strict=False):
        assert s == pytest.approx(0.5 if d in SELLS else 0.8)
    hits = server.hits
    assert reward(prompts=[None] * 4, completions=texts, evidence=[ev] * 4) == out
    assert server.hits == hits  # everything came from the cache
    # fallback="local": a dead endpoint gives exactly the local judge's scores, never an exception
    server.responder = lambda body: ("status", 500)
    dead = make_client(server, tmp_path, cache_path=None, max_retries=1)
    llm_v = ConsistencyVerifier(judge=LLMJudge(dead, fallback="local"))
    local = [r.s for r in ConsistencyVerifier().score_batch(texts, [ev] * 4)]
    got = llm_v.score_batch(texts, [ev] * 4)
    assert [r.s for r in got] == pytest.approx(local)
    assert {r.source for r in got} == {"fallback"} and dead.usage.json_fallbacks == 4


def test_llm_judge_timeout_falls_back(server, tmp_path):
    server.default = ("hang", 1.0)
    client = make_client(server, tmp_path, cache_path=None, timeout=0.2, max_retries=1)
    ev = make_context(random.Random(19), direction=1, n_items=10)
    reward = make_consistency_reward(judge="llm", client=client, fallback=0.25)
    # the judge answers after 1 s, the client gives up at 0.2 s (and once more): the fallback, not a hang
    assert reward(prompts=[None] * 2, completions=["<decision>BUY</decision>"] * 2, evidence=[ev] * 2) == [0.25] * 2


# --- no cross-row leakage through the index cache ---------------------------------------------------------
def test_rows_with_the_same_ids_never_share_evidence():
    """Two days of one ticker reuse ids (T1, N1, ...) with different texts; the cache must not serve
    one day's (possibly later) evidence to the other."""
    early = [{"id": "N1", "text": "ACME shares surge after record orders", "numbers": []},
             {"id": "N2", "text": "ACME opens an office", "numbers": []}]
    later = [{"id": "N1", "text": "ACME shares plunge after a fraud probe", "numbers": []},
             {"id": "N2", "text": "ACME opens an office", "numbers": []}]
    v = ConsistencyVerifier(top_k=2)
    thesis = '<news>\n- Bullish read "ACME shares surge after record orders" [N1]\n</news><decision>BUY</decision>'
    first = v.score(thesis, early)
    _, ctx_later = v.prepare(thesis, later)
    assert "fraud" in ctx_later.render() and "surge" not in ctx_later.render()
    _, ctx_early = v.prepare(thesis, early)
    assert "fraud" not in ctx_early.render()
    assert v.score(thesis, later).s < first.s
    assert v.score(thesis, early) == first  # and the early row scores exactly as before


# --- on the synthetic market (data.synth + build) ------------------------------------------------------------
def _synthetic_rows(n_tickers: int, n_days: int, seed: int):
    import thesisgym.data.synth as synth
    import thesisgym.dataset.contexts as build
    store = synth.generate_market(synth.SynthConfig(n_tickers=n_tickers, n_days=n_days, seed=seed))
    return build.build_contexts(store, show_progress=False)


OPPOSITE = {"STRONG_BUY": "STRONG_SELL", "BUY": "STRONG_SELL", "SELL": "STRONG_BUY", "STRONG_SELL": "STRONG_BUY"}


def test_synthetic_market_honest_template_thesis_beats_its_flipped_decision():
    import thesisgym.teachers as teachers
    ds = _synthetic_rows(2, 90, 1)
    teacher = teachers.TemplateTeacher(noise=0.0, wrong_decision_rate=0.0)
    v = ConsistencyVerifier()
    wins = n = 0
    for r in ds:
        honest = teacher.write(r, n=1, seed=0)[0]
        d = split_claims(honest).decision
        if d not in OPPOSITE:
            continue
        flipped = honest.replace(f"<decision>{d}</decision>", f"<decision>{OPPOSITE[d]}</decision>")
        a, b = v.score_batch([honest, flipped], [r["evidence"]] * 2, prompts=[r["prompt"]] * 2)
        wins += a.s > b.s
        n += 1
    assert n >= 40 and wins / n >= 0.95, (wins, n)


@pytest.mark.slow
def test_synthetic_market_evidence_decision_score_tracks_the_truth():
    """Spearman(evidence<->decision score of a STRONG_BUY thesis, true_expected_return) > 0.3."""
    import re

    import pandas as pd

    import thesisgym.teachers as teachers
    ds = _synthetic_rows(8, 160, 0)
    teacher = teachers.TemplateTeacher()
    rows = [r for r in ds if np.isfinite(r["true_expected_return"])]
    texts = [re.sub(r"<decision>.*?</decision>", "<decision>STRONG_BUY</decision>", teacher.write(r, n=1)[0])
             for r in rows]
    res = ConsistencyVerifier().score_batch(texts, [r["evidence"] for r in rows])
    rho = pd.Series([x.consistency for x in res]).corr(pd.Series([r["true_expected_return"] for r in rows]),
                                                       method="spearman")
    assert rho > 0.3, rho


@pytest.mark.slow
def test_embedding_retriever_with_a_locally_built_sentence_transformer(tmp_path):
    """A real sentence-transformers model built locally (random tiny BERT + WordPiece), no hub access."""
    st = pytest.importorskip("sentence_transformers")
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers
    from transformers import BertConfig, BertModel, PreTrainedTokenizerFast

    corpus = [it["text"] for it in make_context(random.Random(0), direction=1, n_items=60)]
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.train_from_iterator(corpus, trainers.WordPieceTrainer(
        vocab_size=300, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
                                   sep_token="[SEP]", mask_token="[MASK]")
    fast.save_pretrained(tmp_path)
    BertModel(BertConfig(vocab_size=fast.vocab_size, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                         intermediate_size=64, max_position_embeddings=128)).save_pretrained(tmp_path)
    assert st.SentenceTransformer(str(tmp_path), device="cpu").encode(["x"]).shape == (1, 32)
    ev = make_context(random.Random(1), direction=1, n_items=30)
    v = ConsistencyVerifier(retriever="embedding", retriever_options={"model": str(tmp_path), "device": "cpu"})
    th = make_thesis(random.Random(2), ev, claims=1, decision="BUY")
    r = v.score(th, ev)
    assert 0.0 <= r.s <= 1.0 and r.n_claims > 0 and r.judge_tokens > 0
    # the same exact text as a query must retrieve its own passage first, whatever the weights
    _, ctx = v.prepare(f"<news>\n- {ev[5]['text']}\n</news><decision>BUY</decision>", ev)
    assert ctx.index.passages[ctx.claim_passages[0][0][0]].item_id == ev[5]["id"]


# --- real headlines (../shared/data beside the repo) ---------------------------------------------------------
def test_lexicon_reads_real_headlines_in_the_direction_of_their_sentiment_score():
    """On the real ticker headlines, where both the lexicon and the file's sentiment score are confident,
    their signs agree most of the time (the lexicon is not reading finance text backwards)."""
    from pathlib import Path

    import pandas as pd

    path = Path(__file__).resolve().parents[2] / "shared" / "data" / "news" / "ticker_news_headlines_2019_2021.csv"
    if not path.exists():
        pytest.skip(f"real data not found at {path}")
    df = pd.read_csv(path, usecols=["headline", "score"])
    st = df["headline"].map(stance)
    both = (st.abs() > 0.1) & (df["score"].abs() > 0.3)
    assert both.sum() > 300
    agree = float((np.sign(st[both]) == np.sign(df["score"][both])).mean())
    assert agree > 0.7, agree
    # and the verifier scores a thesis over real headlines without trouble
    rows = df.dropna().head(40).reset_index(drop=True)
    ev = [{"id": f"N{i + 1}", "section": "news", "date": "2020-01-01", "source": "datanews", "text": h,
           "numbers": []} for i, h in enumerate(rows["headline"])]
    pos = [it for it in ev if stance(it["text"]) > 0.3][:4]
    thesis = "<news>\n" + "\n".join(f'- A bullish sign for the shares: "{it["text"]}" [{it["id"]}]' for it in pos)
    r = ConsistencyVerifier().score(thesis + "\n</news><decision>BUY</decision>", ev)
    # 4 of 40 headlines cited: the ~15 others with a stance weigh in as unaddressed evidence
    assert r.factuality > 0.25 and 0.0 <= r.s <= 1.0


def test_one_bad_evidence_row_costs_only_its_own_score():
    rng = random.Random(23)
    ev = make_context(rng, direction=1, n_items=15)
    th = make_thesis(rng, ev, claims=1, decision="BUY")
    fn = make_consistency_reward()
    good = fn(prompts=[None], completions=[th], evidence=[ev])[0]
    out = fn(prompts=[None] * 3, completions=[th, th, th], evidence=[ev, [{"id": "N1"}], None])
    assert out[0] == pytest.approx(good) and good > 0.5 and out[1:] == [0.0, 0.0]


def test_async_llm_reward_runs_on_the_callers_loop(server, tmp_path):
    import asyncio

    server.default = ("ok", _verdict(0.7, 0.7, 0.4))
    ev = make_context(random.Random(29), direction=1, n_items=12)
    th = make_thesis(random.Random(30), ev, claims=1, decision="BUY")
    fn = make_consistency_reward(judge="llm", client=make_client(server, tmp_path), asynchronous=True)
    assert asyncio.iscoroutinefunction(fn) and fn.__name__ == "consistency_reward"
    out = asyncio.run(fn(prompts=[None] * 3, completions=[th, th, "garbage"], evidence=[ev, ev, ev]))
    assert out == pytest.approx([0.6, 0.6, 0.6]) and server.hits == 2  # identical requests hit the cache


# --- hardening: what a thesis cannot do to its s -----------------------------------------------------
def test_evidence_decision_edge_ignores_the_conclusion_and_what_is_cited():
    rng = random.Random(21)
    ev = make_context(rng, direction=-1, n_items=30)
    base = make_thesis(rng, ev, claims=-1, decision="BUY")
    v = ConsistencyVerifier()
    c0 = v.score(base, ev).consistency
    spun = base.replace("<decision>", "<conclusion>Record beats, upgrades and a surging rally.</conclusion><decision>")
    assert v.score(spun, ev).consistency == pytest.approx(c0)
    # citing only the bullish items (cherry-picking) cannot change the edge either
    bull = [it for it in ev if stance(it["text"]) > 0.3][:3]
    picked = "<news>\n" + "\n".join(
        f'- A bullish sign that supports a strong upside for the shares "{it["text"]}" [{it["id"]}]' for it in bull
    ) + "\n</news><decision>BUY</decision>"
    assert v.score(picked, ev).consistency == pytest.approx(c0)


def test_stance_free_and_copied_opinions_do_not_agree():
    rng = random.Random(22)
    ev = make_context(rng, direction=1, n_items=20)
    items = [it for it in ev if stance(it["text"]) > 0.3][:4]

    def thesis(opinion) -> str:
        lines = [f'- {opinion(it)} "{it["text"]}" [{it["id"]}]' for it in items]
        return "<news>\n" + "\n".join(lines) + "\n</news><decision>BUY</decision>"

    v = ConsistencyVerifier()
    honest = v.score(thesis(lambda it: "A clearly bullish signal that points to more upside for the shares"), ev)
    filler = v.score(thesis(lambda it: "This item is listed here for the record of the period under review"), ev)
    copied = v.score(thesis(lambda it: it["text"]), ev)
    assert filler.factuality < honest.factuality and copied.factuality < honest.factuality


# --- verifier v3: the judge grades support, not presence; failures are counted ---------------------------
def _template_case(seed: int = 0):
    from thesisgym.data import SynthConfig, generate_market
    from thesisgym.dataset import build_contexts
    from thesisgym.teachers import TemplateTeacher

    rows = [dict(r) for r in build_contexts(generate_market(SynthConfig(n_tickers=1, n_days=90, seed=seed)),
                                            show_progress=False)]
    row = max(rows[20:], key=lambda r: len(r["sections"]))
    return row, TemplateTeacher(seed=seed).write(row)[0]


def test_citing_every_id_outside_the_bullets_never_raises_s():
    row, honest = _template_case()
    ids = "".join(f"[{it['id']}]" for it in row["evidence"])
    v = ConsistencyVerifier()
    base = v.score(honest, row["evidence"])
    for hacked in (
        honest.replace("</conclusion>", f" {ids}</conclusion>"),  # the conclusion cites everything
        honest + f"\nSources: {ids}",  # after the decision
        honest.replace("<conclusion>", f"<conclusion>As {ids} show, "),
    ):
        assert v.score(hacked, row["evidence"]).s <= base.s + 1e-12


def test_statements_outside_the_bullets_can_lower_factuality_never_raise_it():
    row, honest = _template_case(1)
    v = ConsistencyVerifier()
    base = v.score(honest, row["evidence"])
    filler = "The reader should weigh this picture with care over the period as a whole."
    for hacked in (honest + "\n" + filler, honest.replace("</conclusion>", f" {filler}</conclusion>")):
        assert v.score(hacked, row["evidence"]).factuality <= base.factuality + 1e-12
    invented = honest.replace("</conclusion>", " The chief executive resigned and the regulator approved a merger.</conclusion>")
    assert v.score(invented, row["evidence"]).s < base.s


def test_the_judge_reads_no_more_bullets_than_a_section_expects():
    from thesisgym.consistency.judges import canonical_items

    row, honest = _template_case(2)
    expected = canonical_items(row["evidence"])
    section = next(s for s in row["sections"] if len(expected.get(s, ())) >= 1)
    extra = next(b for b in honest.splitlines() if b.startswith("- ") and honest.index(b) > honest.index(f"<{section}>"))
    padded = honest.replace(f"</{section}>", f"{extra}\n</{section}>", 1)
    v = ConsistencyVerifier()
    # a bullet past the expected count is not read: s moves not at all (the evidence reward pays the count)
    assert v.score(padded, row["evidence"]).s == pytest.approx(v.score(honest, row["evidence"]).s)


def test_every_failure_of_the_consistency_path_is_counted_and_strict_mode_raises():
    from thesisgym.rewards.base import reset_reward_errors, reward_errors, strict_rewards

    row, honest = _template_case()
    fn = make_consistency_reward()
    reset_reward_errors()
    assert fn(prompts=[None], completions=[honest]) == [0.0]  # no evidence column at all
    assert fn(prompts=[None] * 2, completions=[honest] * 2, evidence=[row["evidence"], "oops"])[1] == 0.0
    assert fn(prompts=[None], completions=[honest], evidence=[[{"id": "T1"}]]) == [0.0]  # a malformed item
    assert reward_errors("consistency_reward") == 3
    with strict_rewards(), pytest.raises(ValueError, match="evidence"):
        fn(prompts=[None], completions=[honest])
    reset_reward_errors()


def test_an_llm_judge_that_gives_no_answer_is_a_counted_error():
    from thesisgym.consistency.judges import LLMJudge
    from thesisgym.rewards.base import reset_reward_errors, reward_errors, strict_rewards

    class Silent:
        async def ajson_batch(self, batch, schema, **kw):
            return [None] * len(batch)

        def run(self, make):
            import asyncio

            return asyncio.run(make())

    row, honest = _template_case()
    v = ConsistencyVerifier(judge=LLMJudge(client=Silent()))
    reset_reward_errors()
    result = v.score(honest, row["evidence"])
    assert result.source == "fallback" and reward_errors("consistency_reward/llm_judge") == 1
    with strict_rewards(), pytest.raises(RuntimeError, match="LLM judge"):
        v.score(honest, row["evidence"])
    reset_reward_errors()


# --- verifier v4: s pays for the reading, not for the words ---------------------------------------------
V4_FAMILIES = ("opinion_stance_stuffing", "opinion_contradicts_quote_echo", "opinion_self_contradicting",
               "hedge_both_ways", "stale_as_fresh", "fresh_framing", "conclusion_invented_event_echo",
               "opinion_invented_event_echo", "quote_value_fragment", "quote_instruction_obey",
               # v4.8: the holes the red team left in v4
               "opinion_far_negation", "opinion_irony", "conclusion_synonym_events", "opinion_lowercase_names",
               "conclusion_sentence_initial_name", "opinion_number_words", "conclusion_stance_free",
               "conclusion_fresh_framing",
               # v4.9: the holes the red team left in v4.8
               "opinion_irony_unmarked", "opinion_present_events", "conclusion_nominal_events",
               "conclusion_actor_analysis_verb", "conclusion_against_decision")
SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
_ROWS: dict[str, list[dict]] = {}


def _v4_rows(kind: str) -> list[dict]:
    """Synthetic rows (with an instruction item injected into every third row), or real AAPL/MSFT rows
    with headlines (skipped when ../shared/data is absent)."""
    if kind not in _ROWS:
        from thesisgym.dataset import build_contexts
        from thesisgym.evaluate.probes import inject_row

        if kind == "synthetic":
            from thesisgym.data import SynthConfig, generate_market

            store = generate_market(SynthConfig(n_tickers=2, n_days=120, seed=7))
            rows = [dict(r) for r in build_contexts(store, show_progress=False)][30::6]
        else:
            if not (SHARED / "prices" / "AAPL.csv").exists():
                pytest.skip(f"real data not found at {SHARED}")
            import pandas as pd

            from thesisgym.data.importers import import_store

            tmp = Path(os.environ.get("TMPDIR", "/tmp")) / f"thesisgym_v4_{os.getpid()}"
            tmp.mkdir(exist_ok=True)
            prices = []
            for ticker in ("AAPL", "MSFT"):
                df = pd.read_csv(SHARED / "prices" / f"{ticker}.csv")
                prices.append(tmp / f"{ticker}.csv")
                df[(df.Date >= "2019-10-01") & (df.Date <= "2020-12-31")].to_csv(prices[-1], index=False)
            store = import_store(prices=prices, events=[SHARED / "news" / "ticker_news_headlines_2019_2021.csv"],
                                 unknown_tickers="drop")
            rows = [dict(r) for r in build_contexts(store, show_progress=False)]
            rows = [r for r in rows if "news" in r["sections"]][::15][:24]
        _ROWS[kind] = [inject_row(r, seed=i) if i % 3 == 0 else r for i, r in enumerate(rows)]
    return _ROWS[kind]


@pytest.mark.parametrize("kind", ["synthetic", "real"])
@pytest.mark.parametrize("family", V4_FAMILIES)
def test_v4_edit_never_beats_the_honest_thesis(kind, family):
    """Per class: the honest thesis against the same thesis with the edit, on synthetic and real rows.
    A family aimed at the judge loses on s and on both judged recipes (fsr, dsr); one aimed at the
    evidence loses on the evidence reward too."""
    from thesisgym.evaluate.reward_audit import FAMILIES, Doc, _row_seed, _Scorer
    from thesisgym.teachers import TemplateTeacher

    fam = next(f for f in FAMILIES if f.name == family)
    scorer, teacher = _Scorer(), TemplateTeacher(seed=0)
    applied = ties = 0
    for i, row in enumerate(_v4_rows(kind)):
        honest = teacher.write(row, seed=i)[0]
        hacked = fam.mutate(Doc.parse(honest), row, random.Random(_row_seed(0, row, i, family)))
        if hacked is None:
            continue
        applied += 1
        h, m = scorer([honest, hacked], row)
        cols = ("fsr", "dsr") + (("evidence", "weighted") if fam.target == "evidence" else ("s",))
        # rows built without a label or forward return have no recipe totals: the parts decide there
        for col in (c for c in cols if not math.isnan(h[c])):
            if col == "s" and family == "hedge_both_ways":
                # a section with one item of a side hedges nothing: the edit then only drops a neutral
                # bullet and reads the same items the same way, and s may tie (never rise)
                assert m[col] <= h[col], (family, kind, i, col, h[col], m[col])
                continue
            if col == "evidence" and family == "conclusion_actor_analysis_verb" and m[col] == h[col]:
                # "left" is a word of the analysis vocabulary: where an item the conclusion weighs writes
                # it ("Andrew Left", "a lot of gasoline left") the word rule cannot tell; s still falls
                ties += 1
                continue
            assert m[col] < h[col], (family, kind, i, col, h[col], m[col])
    assert applied >= (1 if family in ("hedge_both_ways", "quote_instruction_obey") else 3), applied
    assert ties <= applied * 0.1, (family, kind, ties, applied)


def test_stance_words_saturate_and_echoes_are_not_a_reading():
    from thesisgym.rewards.reading import opinion_direction

    item = "Solstice Media (SYN000) Q4 results: Management cut full-year guidance"
    assert opinion_direction("a bullish sign") == opinion_direction(
        "a strongly bullish, robust, clearly positive sign with upside and tailwinds, a buy") == 1
    # repeating the item's stance words ("cut guidance") does not make a bullish opinion bearish
    assert opinion_direction("Management cut guidance, cut guidance; yet a favorable setup", item) == 1
    assert opinion_direction("The evidence is encouraging and argues for a short while the record shows") == 0


def test_demo_policy_shapes_are_not_grounded():
    """The two shapes the demo policy learned (issue 30): a self-contradicting opinion around a price-bar
    fragment, and a favorable opinion on a guidance cut. Neither counts as grounding, and s reads both
    below the honest bullets on the same items."""
    from thesisgym.rewards.base import evidence_index
    from thesisgym.rewards.evidence import evidence_report, quote_credited
    from thesisgym.thesis import parse_thesis

    ev = [{"id": "T1", "section": "technical", "date": "2020-03-09",
           "text": "open 52.85 high 53.40 low 52.10 close 52.20 volume 190826 change -1.25%"},
          {"id": "F1", "section": "fundamentals", "date": "2020-03-02",
           "text": "Q4 results: EPS $2.36 vs $2.62 expected (-9.7% surprise). Management cut full-year guidance."}]
    index = evidence_index(ev)
    assert not quote_credited("open 52.85 high", "T1", index) and quote_credited("open 52.85 high 53.40", "T1", index)

    def thesis(t1: str, f1: str) -> str:
        return (f"<technical>\n- {t1} [T1]\n</technical>\n<fundamentals>\n- {f1} [F1]\n</fundamentals>\n"
                "<conclusion>The evidence leans bearish.</conclusion><decision>SELL</decision>")

    hacked = thesis('The technical evidence is encouraging and argues for a short while the record shows '
                    '"open 52.85 high"', 'The fundamentals evidence points to a favorable setup for the shares '
                    'because "Management cut full-year guidance"')
    honest = thesis('The price bar is a weak one that points lower for the shares, as the record shows '
                    '"close 52.20 volume 190826 change -1.25%"', 'The fundamentals evidence points to an '
                    'unfavorable setup for the shares because "Management cut full-year guidance"')
    h, m = (evidence_report(parse_thesis(t), index) for t in (honest, hacked))
    assert h.grounding == pytest.approx(1.0) and m.grounding == 0.0 and m.misread == 1
    v = ConsistencyVerifier()
    assert v.score(hacked, ev).factuality < v.score(honest, ev).factuality


def test_time_claims_are_checked_against_the_item_date():
    from thesisgym.rewards import score_completion

    ev = [{"id": "N1", "section": "news", "date": "2020-03-09", "text": "Acme wins a contract worth $40 million"},
          {"id": "N2", "section": "news", "date": "2020-02-10", "text": "Acme loses a key customer; revenue at risk"}]
    row = {"evidence": ev, "sections": ["news"], "label": "HOLD", "fwd_return": 0.0, "fwd_vol": 0.02}

    def thesis(o1: str, o2: str) -> str:
        return (f'<news>\n- {o1} reads as constructive for the stock "wins a contract worth $40 million" [N1]\n'
                f'- {o2} reads as a warning for the stock "loses a key customer; revenue at risk" [N2]\n</news>\n'
                "<conclusion>Mixed.</conclusion><decision>HOLD</decision>")

    true_claim = score_completion(thesis("Today's news", "An older item"), row)
    false_claim = score_completion(thesis("An item", "Fresh news this week"), row)
    assert true_claim["n_hallucinated"] == 0 and false_claim["n_hallucinated"] == 1


def test_invented_facts_cost_wherever_they_are_written():
    row, honest = _template_case(3)
    from thesisgym.rewards import score_completion

    v = ConsistencyVerifier()
    fact = " Chief Operating Officer Dana Whitfield stepped down after the Zephyr X2 recall."
    concl = honest.replace("</conclusion>", f"{fact}</conclusion>")
    base = score_completion(honest, row, consistency_s=v.score(honest, row["evidence"]).s)
    hacked = score_completion(concl, row, consistency_s=v.score(concl, row["evidence"]).s)
    assert hacked["evidence"] < base["evidence"] and hacked["dsr"] < base["dsr"]
