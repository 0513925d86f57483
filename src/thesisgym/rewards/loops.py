"""Loop penalty: detect degenerate repetition (a reasoning model stuck in a cycle).

Following "Why reasoning models loop" (arXiv 2512.12895): an output loops when some n-gram of
tokens repeats at least k times (n = 30, k = 20 for long outputs). Fixed n, k would miss loops in
the short theses a small policy writes, so both scale with the length L (whitespace tokens):
    n = clamp(round(L / 40), 6, 30)      k = clamp(round(L / 200), 4, 20)
(L = 400 -> n = 10, k = 4; L >= 6,000 -> n = 30, k = 20). An honest 400-word thesis does not
repeat a 10-word phrase four times; a loop does.

loop_rate = share of token positions whose n-gram occurs >= k times (0 = no repetition).
penalty   = 0 when no n-gram reaches k, else -min(1, 2 * loop_rate), in [-1, 0].

A share falls when text is added, and (n, k) grow with the length: padding a thesis with fresh text
would dilute its repetition. So the thesis (everything but the thinking) is measured with fixed
parameters, THESIS_N = 10 and THESIS_K = 4 (those of a 400-token output), whatever its length, and
its repeated positions are counted per LOOP_REF_TOKENS = 800 tokens: loop_rate = repeated /
LOOP_REF_TOKENS (capped at 1). Text added anywhere can only add repeated n-grams to that count,
never remove one. The thinking, which may run to thousands of tokens, keeps the length-scaled share
above.
Proportional on purpose: a 20-word templated phrase repeated four times in a thesis (loop_rate
~0.06, penalty ~-0.11) is a style defect, while a model stuck in a cycle until the token limit
(loop_rate >= 0.5) gets the full -1.

Repeated bullets: a bullet (a line opening with "-", "*", "•" or "1.") that repeats an earlier one
after normalisation (thesis.normalize_text: case, whitespace, NFKC, zero-width characters; plus
Cyrillic/Greek homoglyphs folded to Latin) is a repeat: bullet_rate = repeats / bullets and its
penalty -min(1, 2 * bullet_rate). A thesis that writes each bullet 5 times has bullet_rate 0.8 ->
-1, whatever invisible characters tell the copies apart. The reported loop_rate and penalty are
the worse of the n-gram and the bullet measure.

Thinking and the thesis are measured apart (the <think> blocks and the rest, `thesis.split_think`)
and the worse counts: text added to one cannot dilute a loop in the other.

Linear time: a token-frequency prefilter (a looping n-gram needs n consecutive tokens that each
occur >= k times; honest text almost never has such a run) and otherwise token ids -> one vectorised polynomial rolling hash over n-grams (numpy, 64-bit
wrap-around arithmetic, deterministic) -> counts. At most MAX_LOOP_TOKENS tokens are looked at.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from thesisgym.rewards.base import log_metric, per_completion
from thesisgym.thesis import completion_text, normalize_text, split_think

__all__ = ["LOOP_REF_TOKENS", "MAX_LOOP_TOKENS", "THESIS_K", "THESIS_N", "loop_params", "loop_penalty", "loop_rate", "loop_stats"]

MAX_LOOP_TOKENS = 50_000
LOOP_REF_TOKENS = 800
THESIS_N, THESIS_K = 10, 4
_MAX_LOOP_CHARS = 600_000
_BASE = np.uint64(1_000_003)


def loop_params(length: int) -> tuple[int, int]:
    """(n, k) for an output of `length` tokens."""
    n = min(30, max(6, round(length / 40)))
    k = min(20, max(4, round(length / 200)))
    return n, k


def _has_run(tokens: list[str], freq: dict[str, int], k: int, n: int) -> bool:
    """Whether some n consecutive tokens all occur >= k times (`freq`: token counts).

    Any n consecutive positions contain exactly one multiple of n, so only runs through those
    positions need looking at: ~len/n set lookups for prose (whose runs of frequent tokens are
    short) instead of one per token, and at most ~2 per token in the worst case.
    """
    last = len(tokens) - 1
    # counts are read directly: building the set of frequent tokens cost more than these few lookups
    for j in range(0, len(tokens), n):
        if freq[tokens[j]] < k:
            continue
        lo = j
        while lo > 0 and j - lo < n - 1 and freq[tokens[lo - 1]] >= k:
            lo -= 1
        hi = j
        while hi < last and hi - lo < n - 1 and freq[tokens[hi + 1]] >= k:
            hi += 1
        if hi - lo + 1 >= n:
            return True
    return False


# Cyrillic and Greek letters that render like Latin ones: folded so that "а" copies of a bullet repeat
HOMOGLYPHS = str.maketrans(
    "аеорсухіјѕԁɡοαεικνρτυχ",
    "aeopcyxijsdgoaeikvptux",
)
_BULLET_MARKS = ("-", "*", "•")


def bullet_repeats(text: str) -> tuple[int, int]:
    """(bullets, bullets repeating an earlier one) of a text, after normalisation and homoglyph folding."""
    lines = text.splitlines()
    if text.isascii() and len(set(lines)) == len(lines):
        return 0, 0  # no line repeats exactly and no invisible variant can hide in ASCII: no repeat
    seen: set[str] = set()
    n = repeats = 0
    for line in lines:
        line = line.strip()
        if not line or not (line.startswith(_BULLET_MARKS) or (line[0].isdigit() and line[1:3] in (". ", ") "))):
            continue
        key = line if line.isascii() else normalize_text(line).translate(HOMOGLYPHS)
        key = " ".join(key.lower().split())
        n += 1
        if key in seen:
            repeats += 1
        else:
            seen.add(key)
    return n, repeats


def _split(text: str) -> tuple[str, str | None]:
    """(thesis, thinking) of a text, as `thesis.split_think` cuts them (as tokens: only token
    boundaries matter here); the canonical one leading <think> block is cut with str.find."""
    if "think" not in text and "THINK" not in text and "Think" not in text:
        return text, None
    if text.startswith("<think>") and text.count("think") == 2 and text.count("THINK") == text.count("Think") == 0:
        end = text.find("</think>")
        if end != -1:
            return text[end + 8 :], text[7:end]
    return split_think(text)


def loop_stats(text: str) -> tuple[float, float]:
    """(loop_rate, penalty) of a text: the worse of the n-gram measure of its thinking, that of the
    rest, and the bullet measure (module docstring)."""
    head = text[:_MAX_LOOP_CHARS] if len(text) > _MAX_LOOP_CHARS else text
    body, think = _split(head)
    tokens = body.split()
    if len(tokens) > MAX_LOOP_TOKENS:
        tokens = tokens[:MAX_LOOP_TOKENS]
    # fixed parameters and a count per LOOP_REF_TOKENS tokens: adding text cannot dilute it
    rate = min(1.0, _repeated_positions(tokens, THESIS_N, THESIS_K)[0] / LOOP_REF_TOKENS)
    penalty = -min(1.0, 2.0 * rate) if rate else 0.0
    if think:
        t_tokens = think.split()[:MAX_LOOP_TOKENS]
        t_rate, t_penalty = _ngram_loop_stats(t_tokens, *loop_params(len(t_tokens)))
        rate, penalty = max(rate, t_rate), min(penalty, t_penalty)
    n, repeats = bullet_repeats(head)
    if repeats:
        b_rate = repeats / n
        if b_rate > rate:
            rate = b_rate
        penalty = min(penalty, -min(1.0, 2.0 * b_rate))
    return rate, penalty


def _repeated_positions(tokens: list[str], n: int, k: int) -> tuple[int, int]:
    """(n-gram positions whose n-gram occurs >= k times, n-gram positions) of a token list."""
    m = len(tokens) - n + 1
    if len(tokens) < n * k:
        return 0, max(m, 0)
    # exact pruning: a looping n-gram is n consecutive tokens that each occur >= k times, and
    # honest prose almost never has such a run; the n-gram hashing below runs only when it does
    freq = Counter(tokens)
    if not _has_run(tokens, freq, k, n):
        return 0, m
    vocab = dict(zip(freq, range(len(freq)), strict=True))
    ids: Any = np.fromiter(map(vocab.__getitem__, tokens), dtype=np.int64, count=len(tokens))
    ids = ids.astype(np.uint64) + np.uint64(1)
    h: Any = np.zeros(m, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for j in range(n):
            h = h * _BASE + ids[j : j + m]
    _, inverse, counts = np.unique(h, return_inverse=True, return_counts=True)
    return int((counts[inverse] >= k).sum()), m


def _ngram_loop_stats(tokens: list[str], n: int, k: int) -> tuple[float, float]:
    """(share of positions whose n-gram occurs >= k times, its penalty) of a token list."""
    repeated, m = _repeated_positions(tokens, n, k)
    if not repeated:
        return 0.0, 0.0
    rate = repeated / m
    return rate, -min(1.0, 2.0 * rate)


def loop_rate(text: str) -> float:
    """Share of n-gram positions that belong to a loop (0 = none)."""
    return loop_stats(text)[0]


def loop_penalty(
    prompts: Sequence[Any] | None = None, completions: Sequence[Any] | None = None, **kwargs: Any
) -> list[float | None]:
    """TRL reward in [-1, 0]: 0 without a loop, -min(1, 2 loop_rate) with one; logs loops/loop_rate."""
    rates: list[float] = []

    def score(i: int, completion: Any) -> float:
        rate, penalty = loop_stats(completion_text(completion))
        rates.append(rate)
        return penalty

    out = per_completion(completions, score, minimum=-1.0, lo=-1.0, hi=0.0, name="loop_penalty", kwargs=kwargs)
    log_metric(kwargs, "loops/loop_rate", rates)
    log_metric(kwargs, "loops/looping", [float(v is not None and v < 0) for v in out])
    return out
