"""What goes into one prompt: random section subsets/orders (variations) and token-budget dropping.

Variations need randomness that depends only on (seed, ticker, day, variation), never on which other
rows are built, so a row is reproducible on its own: a splitmix64 hash, vectorised with numpy.
The budget drops items by priority tiers (lower first; oldest first within a tier), see
`thesisgym.dataset.contexts` for the order.
"""

from __future__ import annotations

import zlib

import numpy as np


def mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser (uint64 arithmetic wraps by design)."""
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def section_uniforms(seed: int, ticker: str, day_ord: np.ndarray, k: int, m: int) -> np.ndarray:
    """u[row, variation, j] in [0, 1), a pure function of (seed, ticker, day, variation, j)."""
    base = np.uint64(zlib.crc32(ticker.encode()) | ((seed & 0xFFFFFFFF) << 32))
    with np.errstate(over="ignore"):
        key = mix64(day_ord.astype("uint64")[:, None, None] * np.uint64(0x9E3779B97F4A7C15) + base)
        key = key + np.arange(k, dtype="uint64")[None, :, None] * np.uint64(0xD1B54A32D192ED03)
        key = key + np.arange(m, dtype="uint64")[None, None, :] * np.uint64(0x8CB92BA72F3D8DD7)
        x = mix64(mix64(key))
    return (x >> np.uint64(11)).astype("float64") / float(2**53)


# --- token budget ---------------------------------------------------------------------------------
# Priority per item, lower is dropped first (module docstring); news buckets d-3..d, d-10..d-4, d-30..d-11.
_NEWS_TIERS = (5, 1, 0)


def item_tiers(section: str, n: int, news_split: tuple[int, ...], n_ind: int) -> list[int]:
    if section == "news":
        tiers: list[int] = []
        for b, size in enumerate(news_split):
            tiers += [_NEWS_TIERS[b] if b < len(_NEWS_TIERS) else 0] * size
        return tiers
    if section == "macro":
        return [2] * n
    if section in ("insider", "analyst"):
        return [4] * n
    if section == "fundamentals":
        return [9] + [6] * (n - 1)
    # technical: indicators first, then bars newest first
    return [7] * n_ind + [8 if j < 5 else 3 for j in range(n - n_ind)]


def apply_budget(
    groups: list[tuple[str, list[int], list[int]]], ntok: np.ndarray, fixed: int, budget: int, where: str
) -> list[tuple[str, list[int]]]:
    total = fixed + int(sum(int(ntok[i]) for _, items, _ in groups for i in items))
    if total <= budget:
        return [(s, items) for s, items, _ in groups]
    cand = [(tiers[p], -p, g, p) for g, (_, items, tiers) in enumerate(groups) for p in range(len(items))]
    cand.sort()
    dropped: set[tuple[int, int]] = set()
    for _, _, g, p in cand:
        if total <= budget:
            break
        total -= int(ntok[groups[g][1][p]])
        dropped.add((g, p))
    if total > budget:
        raise ValueError(
            f"build_contexts: token_budget={budget} is below the fixed part of the prompt ({where})"
        )
    out = []
    for g, (s, items, _) in enumerate(groups):
        kept = [i for p, i in enumerate(items) if (g, p) not in dropped]
        if kept:
            out.append((s, kept))
    return out
