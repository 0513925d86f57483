"""The copy warm-up: its texts are pure copying, and a short run gives a tiny model the copy ability."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from thesisgym.train.models import build_tokenizer  # noqa: E402
from thesisgym.train.warmup import SEPARATOR, copy_targets, copy_texts  # noqa: E402
from toydata import copy_task_rows  # noqa: E402


def _corpus() -> list[str]:
    rows = copy_task_rows(200, items=3, seed=5)
    return [r["prompt"][0]["content"] + "\n" + r["completion"][0]["content"] for r in rows]


@pytest.fixture(scope="module")
def tokenizer():
    return build_tokenizer(_corpus(), vocab_size=600)


def test_copy_texts_are_deterministic_and_copy_only(tokenizer):
    texts = copy_texts(tokenizer, 40, length=8, seed=3)
    assert texts == copy_texts(tokenizer, 40, length=8, seed=3)
    assert texts != copy_texts(tokenizer, 40, length=8, seed=4)
    repeats, lookups = texts[0::2], texts[1::2]
    for text in repeats:  # the second half is the first, word for word
        first, second = text.split(SEPARATOR)
        assert first == second and 4 <= len(first.split()) <= 16
    for text in lookups:  # the citation quotes the start of the cited line's body
        *lines, citation = text.split(SEPARATOR)
        cited_id, quote = citation.split(' "', 1)
        body = next(line.split(" | ", 2)[2] for line in lines if line.startswith(cited_id + " "))
        assert body.startswith(quote.rstrip('"'))


def test_copy_targets_are_the_copied_tokens(tokenizer):
    repeat, lookup = copy_texts(tokenizer, 2, length=6, seed=0)
    ids, start = copy_targets(tokenizer, repeat)
    assert tokenizer.decode(ids[start:]) == repeat.split(SEPARATOR)[1]
    ids, start = copy_targets(tokenizer, lookup)
    quote = lookup.rsplit(' "', 1)[1]
    assert tokenizer.decode(ids[start:]).strip() == quote  # the quoted words and the closing mark


def test_copy_texts_refuse_a_vocabulary_without_enough_words():
    tok = build_tokenizer(["a b c 1 2 3"] * 5, vocab_size=300)
    with pytest.raises(ValueError, match="whole-word tokens"):
        copy_texts(tok, 4, length=12)
    with pytest.raises(ValueError, match="positive"):
        copy_texts(tok, 0)
