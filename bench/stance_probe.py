"""Can a fitted reader of stance generalise where the lexicon does not? A linear probe on the offline base.

Why: the lexical reader (`reading.opinion_direction`) reads the phrasings its rules were written for and
little else: on the held-out red-team round of bench/reading_redteam.py (round 5) 45 of 54 attacks escape.
The question is whether a model fitted on the earlier rounds reads the held-out one better. The only
pretrained model available offline is the `smollm2-135m` preset, so this fits a logistic regression
(scikit-learn) on its hidden states: rounds 1-4 for training (an honest phrasing labelled with the
direction a careful reader gives it, an attack with the opposite of its item's), round 5 for the test,
scored exactly as reading_redteam.py scores the lexicon (an honest phrasing read against its direction
is a false charge; an attack not read against its item escapes).

Features: the mean of one layer's hidden states over the opinion's tokens (`plain`), or the last token's
state after a question about the analyst's stance (`ask`); layers 10, 20, 30 and their concatenation.

    PYTHONPATH=src python bench/stance_probe.py [--C 0.1,1.0] [--threads 2]

About 3 minutes on 2 cores (one forward pass per phrasing and template, fp32).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import reading_redteam as R  # noqa: E402

TEMPLATES = {
    "plain": "{}",
    "ask": 'An analyst wrote about a stock: "{}"\nIs the analyst bullish or bearish on the stock? The analyst is',
}
LAYER_SETS = ([10], [20], [30], [10, 20, 30])


def labelled(rounds: list[tuple[list, list]]) -> list[tuple[str, int]]:
    """(phrasing, direction): an honest phrasing's own, the opposite of an attack's item."""
    return [(t, d) for honest, attacks in rounds for t, d in honest] + [
        (t, -d) for honest, attacks in rounds for t, d in attacks]


def hidden_states(texts: list[str], template: str, model, tok) -> list:
    """Per text, the tuple of per-layer states it is read from (the mean over tokens, or the last token)."""
    import torch

    out = []
    with torch.no_grad():
        for t in texts:
            ids = tok(TEMPLATES[template].format(t), return_tensors="pt")
            hs = model(**ids, output_hidden_states=True).hidden_states
            out.append([(h[0][-1] if template == "ask" else h[0].mean(0)).numpy() for h in hs])
    return out


def features(states: list, layers: list[int]) -> np.ndarray:
    return np.array([np.concatenate([s[i] for i in layers]) for s in states])


def score(pred_honest, honest, pred_attacks, attacks) -> tuple[int, int, int]:
    """(honest charged, attacks escaped, escapes read as the item's own direction), as reading_redteam.score."""
    charged = sum(1 for (_, want), p in zip(honest, pred_honest, strict=True) if want and p == -want)
    escaped = sum(1 for (_, item), p in zip(attacks, pred_attacks, strict=True) if p != -item)
    credited = sum(1 for (_, item), p in zip(attacks, pred_attacks, strict=True) if p == item)
    return charged, escaped, credited


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--C", default="0.1,1.0", help="inverse regularisation strengths to try")
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    import torch
    from sklearn.linear_model import LogisticRegression
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from thesisgym.train.presets import resolve_model

    torch.set_num_threads(a.threads)
    path = resolve_model("smollm2-135m")
    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    train = labelled([(R.HONEST, R.ATTACKS), (R.HONEST_2, R.ATTACKS_2), (R.HONEST_3, R.ATTACKS_3),
                      (R.HONEST_4, R.ATTACKS_4)])
    y = np.array([d for _, d in train])
    print(f"train: rounds 1-4, {len(train)} phrasings ({int((y == 1).sum())} bullish, {int((y == -1).sum())} bearish, "
          f"{int((y == 0).sum())} neutral); test: round 5, {len(R.HONEST_5)} honest, {len(R.ATTACKS_5)} attacks")
    print("lexicon (reading_redteam.py): round 5 honest charged 5 / 55, attacks escaped 45 / 54 (11 credited)")
    for template in TEMPLATES:
        t0 = time.process_time()
        s_train = hidden_states([t for t, _ in train], template, model, tok)
        s_honest = hidden_states([t for t, _ in R.HONEST_5], template, model, tok)
        s_attacks = hidden_states([t for t, _ in R.ATTACKS_5], template, model, tok)
        for layers in LAYER_SETS:
            for c in (float(x) for x in a.C.split(",")):
                clf = LogisticRegression(C=c, max_iter=5000).fit(features(s_train, layers), y)
                charged, escaped, credited = score(clf.predict(features(s_honest, layers)), R.HONEST_5,
                                                   clf.predict(features(s_attacks, layers)), R.ATTACKS_5)
                print(f"{template:5s} layers {str(layers):12s} C {c:<4}: honest charged {charged} / {len(R.HONEST_5)}, "
                      f"attacks escaped {escaped} / {len(R.ATTACKS_5)} ({credited} credited)")
        print(f"  ({template}: {time.process_time() - t0:.0f} s CPU)")


if __name__ == "__main__":
    main()
