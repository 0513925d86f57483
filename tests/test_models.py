"""The tiny preset's tokenizer copies evidence token for token, and a short SFT learns to copy quotes."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from thesisgym.train.models import build_tokenizer  # noqa: E402

EVIDENCE = "[T1] 2020-02-19 | prices | open 22.83 high 23.31 low 22.57 close 23.20 volume 878314 change +2.38%"
THESIS = 'the record shows [T1] "close 23.20 volume 878314 change +2.38%" and more'


@pytest.fixture(scope="module")
def tokenizer():
    corpus = [EVIDENCE, THESIS, "revenue grows 12.5% as orders reach 4,628 units"] * 30
    return build_tokenizer(corpus, vocab_size=400)


def _ids(tok, text: str) -> list[int]:
    return tok(text, add_special_tokens=False)["input_ids"]


def test_every_digit_is_its_own_token(tokenizer):
    pieces = tokenizer.tokenize("volume 878314 and 23.20")
    digits = [p for p in pieces if any(ch.isdigit() for ch in p)]
    assert digits == list("878314") + list("2320")


def test_a_quoted_span_has_the_same_tokens_as_in_the_evidence(tokenizer):
    span = "close 23.20 volume 878314 change +2.38%"
    quote_ids = _ids(tokenizer, THESIS)
    source_ids = _ids(tokenizer, EVIDENCE)
    span_ids = _ids(tokenizer, " " + span)  # the evidence has the span after a space
    assert _contains(source_ids, span_ids)
    assert _contains(quote_ids, span_ids)  # after the opening quote mark: the very same ids
    # the old tokenizer glued the quote mark to the first word, so the spans differed
    old = build_tokenizer([EVIDENCE, THESIS] * 30, vocab_size=400, copy_tokens=False)
    assert not _contains(_ids(old, THESIS), _ids(old, " " + span))


def test_decoding_gives_back_the_exact_text(tokenizer):
    for text in (THESIS, EVIDENCE, 'a "" b  " c', 'He said "no."\n<decision>BUY</decision>'):
        assert tokenizer.decode(_ids(tokenizer, text)) == text


def test_a_saved_tiny_model_reloads_with_the_copy_tokenizer(tmp_path):
    """transformers 5's AutoTokenizer turns a qwen2 model's tokenizer into Qwen2Tokenizer, which drops our
    normaliser: the first quoted word became other tokens than the same word in the evidence."""
    from transformers import AutoTokenizer

    from thesisgym.train.models import build_tiny, load_tokenizer

    path = build_tiny([EVIDENCE, THESIS] * 30, tmp_path / "tiny", vocab_size=400, hidden_size=32, layers=1, heads=2,
                      kv_heads=1)
    tok = load_tokenizer(path)
    span_ids = _ids(tok, " close 23.20 volume")
    assert _contains(_ids(tok, 'shows [T1] "close 23.20 volume'), span_ids)
    assert _contains(_ids(tok, EVIDENCE), span_ids)
    assert tok.padding_side == "left" and tok.pad_token is not None
    # the trap this guards against (if transformers ever stops rewriting, this line may go)
    assert not _contains(_ids(AutoTokenizer.from_pretrained(str(path)), 'shows [T1] "close 23.20 volume'), span_ids)


def _contains(seq: list[int], sub: list[int]) -> bool:
    return any(seq[i:i + len(sub)] == sub for i in range(len(seq) - len(sub) + 1))


def test_copy_task_rows_quote_the_cited_body():
    from thesisgym.rewards import score_completion
    from toydata import copy_task_rows

    rows = copy_task_rows(5, items=3, seed=1)
    assert rows == copy_task_rows(5, items=3, seed=1)
    for row in rows:  # the gold completion is fully grounded under the shared verifier
        assert score_completion(row["completion"], row)["grounding"] == 1.0


@pytest.mark.slow
def test_sft_on_the_copy_task_learns_to_copy(tmp_path):
    """Regression guard for the copy ability: the tokenizer plus an attention-heavy tiny model.

    Measured (docs/training.md, section 4): 2500 steps of 16 rows, 8 heads, learning rate 1e-3 with a
    linear decay: training token accuracy passes 0.99 near step 600 and held-out grounding is 1.0
    (347 s of training on one idle core; this test passed in 353 s). Shorter runs (600 or 800 steps at a constant 1e-3) did not
    copy the words yet, so this is a slow test, not the one-minute default-suite guard the issue asks for.
    """
    import torch
    from datasets import Dataset, DatasetDict

    from thesisgym.train import DataConfig, ModelConfig, SFTRunConfig, run_sft
    from thesisgym.train.config import TinyConfig
    from thesisgym.train.curves import score_theses
    from thesisgym.train.generation import generate_theses
    from thesisgym.train.models import load_model
    from toydata import copy_task_rows

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a model this small is faster on one thread than on a busy pair
    try:
        train = copy_task_rows(8000, items=1, seed=0)
        DatasetDict({"train": Dataset.from_list([{"prompt": r["prompt"], "completion": r["completion"]}
                                                 for r in train])}).save_to_disk(str(tmp_path / "data"))
        cfg = SFTRunConfig(output_dir=str(tmp_path / "run"), data=DataConfig(dataset=str(tmp_path / "data")),
                           model=ModelConfig(tiny=TinyConfig(vocab_size=512, hidden_size=128, layers=2, heads=8,
                                                             kv_heads=8)),
                           max_steps=2500, learning_rate=1e-3, warmup_ratio=0.05,
                           per_device_train_batch_size=16, logging_steps=100, save_steps=10**6, report_to="none")
        model, tok = load_model(run_sft(cfg))
        test = copy_task_rows(16, items=1, seed=99)
        assert score_theses(generate_theses(model, tok, test, max_new_tokens=40), test)["grounding"] > 0.5
    finally:
        torch.set_num_threads(threads)
