"""Policies (JSONL, callable, HF transformers, OpenAI-compatible) and reasoning metrics."""

from __future__ import annotations

import json
import os
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import numpy as np
import pandas as pd
import pytest

from thesisgym.evaluate.completions import join_completions, read_completions, split_keys
from thesisgym.evaluate.policies import (
    INVALID,
    CallablePolicy,
    HFPolicy,
    JsonlPolicy,
    OpenAIPolicy,
    RememberingPolicy,
    confusion_matrix,
    decision_of,
    reasoning_metrics,
    score_rows,
)
from thesisgym.schema import LABELS, SYSTEM_PROMPT

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def _row(ticker="AAA", asof="2024-01-02", variation=0, label="BUY") -> dict:
    return {
        "ticker": ticker,
        "asof": asof,
        "variation": variation,
        "label": label,
        "prompt": [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": f"[T1] {asof} prices: {ticker} close 10.5"},
        ],
        "prompt_text": f"{SYSTEM_PROMPT}\n\n[T1] {asof} prices: {ticker} close 10.5",
        "evidence": [
            {
                "id": "T1",
                "section": "technical",
                "date": asof,
                "source": "prices",
                "text": f"{ticker} close 10.5",
                "numbers": [10.5],
            }
        ],
    }


def _thesis(decision: str) -> str:
    return f'<technical>\n- The close is "AAA close 10.5" which matters a lot for the next week of trading here [T1]\n</technical>\n<conclusion>ok</conclusion>\n<decision>{decision}</decision>'


def test_decision_of_handles_valid_invalid_and_chat_messages():
    assert decision_of(_thesis("BUY")) == "BUY"
    assert decision_of([{"role": "assistant", "content": _thesis("STRONG_SELL")}]) == "STRONG_SELL"
    assert decision_of("no tags at all") == INVALID
    assert decision_of(_thesis("MOON")) == INVALID


def test_jsonl_policy_keyed_by_ticker_asof_variation_and_probe(tmp_path):
    path = tmp_path / "c.jsonl"
    recs = [
        {"ticker": "AAA", "asof": "2024-01-02", "variation": 0, "completion": _thesis("BUY")},
        {
            "ticker": "AAA",
            "asof": "2024-01-02",
            "variation": 1,
            "completion": [{"role": "assistant", "content": _thesis("SELL")}],
        },
        {"ticker": "AAA", "asof": "2024-01-02", "probe": "anon", "completion": _thesis("HOLD")},
    ]
    path.write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    pol = JsonlPolicy(path)
    rows = [_row(variation=1), _row(), {**_row(), "probe": "anon"}]
    assert [decision_of(c) for c in pol.decide(rows)] == ["SELL", "BUY", "HOLD"]
    assert pol.supports_probe("anon") and not pol.supports_probe("shift")
    with pytest.raises(ValueError, match=r"no completion for 2 of 3 rows \(first: row 0 \('BBB'"):
        pol.decide([_row(ticker="BBB"), _row(), _row(ticker="CCC")])


def _write(path, recs):
    path.write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    return path


def test_jsonl_policy_index_is_the_row_of_the_split_not_of_the_batch(tmp_path):
    split = [_row(ticker=t) for t in ("AAA", "BBB", "CCC", "DDD")]
    path = _write(tmp_path / "i.jsonl", [{"index": i, "completion": f"c{i}"} for i in range(4)])
    pol = JsonlPolicy(path)
    with pytest.raises(ValueError, match="need the split"):
        pol.decide(split[:1])
    pol.bind(split_keys(split))
    # a subset (as --max-rows or chunking selects it) still gets each row's own completion
    assert pol.decide([split[3], split[1]]) == ["c3", "c1"]


def test_join_reports_unknown_duplicate_and_out_of_range_by_count_and_example(tmp_path):
    keys = split_keys([_row(ticker=t) for t in ("AAA", "BBB")])
    recs = [
        {"index": 0, "completion": "a"},
        {"ticker": "AAA", "asof": "2024-01-02", "completion": "dup"},
        {"ticker": "ZZZ", "asof": "2024-01-02", "completion": "?"},
        {"ticker": "YYY", "asof": "2024-01-02", "completion": "?"},
        {"index": 7, "completion": "far"},
        {"index": 1, "ticker": "AAA", "asof": "2024-01-02", "completion": "disagrees"},
    ]
    path = _write(tmp_path / "j.jsonl", recs)
    with pytest.raises(ValueError) as exc:
        join_completions(read_completions(path), keys, path=path)
    msg = str(exc.value)
    assert "1 indices out of range (first: line 5: index 7 (split has 2 rows))" in msg
    assert "2 lines with keys not in the split (first: line 3: ticker=ZZZ" in msg
    assert "1 duplicate completions (first: lines 1 and 2" in msg
    assert "1 lines whose index and keys disagree" in msg


@pytest.mark.parametrize(
    ("line", "match"),
    [
        ('{"index": 0, "completion": 42}', r":1: field 'completion' must be a string"),
        ('{"index": 0}', r":1: missing field 'completion'"),
        ('{"completion": "x"}', r":1: needs 'index'"),
        ('{"index": "0", "completion": "x"}', r":1: field 'index' must be a non-negative integer"),
        ('{"ticker": "A", "completion": "x"}', r":1: 'ticker' and 'asof' go together"),
        ('[1, 2]', r":1: expected a JSON object"),
        ("{oops", r":1: not valid JSON"),
    ],
)
def test_malformed_completions_name_line_and_field(tmp_path, line, match):
    path = tmp_path / "bad.jsonl"
    path.write_text(line + "\n")
    with pytest.raises(ValueError, match=match):
        read_completions(path)


def test_missing_completions_file(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        JsonlPolicy(tmp_path / "missing.jsonl")


def test_model_source_errors_are_one_line_and_immediate(tmp_path, monkeypatch):
    from thesisgym.schema import ArgumentError

    # a Python caller reads the argument's name, the CLI the option's
    with pytest.raises(ArgumentError, match=r"^model= ./nope/model: no such directory$") as err:
        HFPolicy("./nope/model")
    assert err.value.for_cli() == "--model ./nope/model: no such directory"
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="has no config.json"):
        HFPolicy(tmp_path / "empty")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    import socket

    def no_network(*args, **kwargs):
        raise AssertionError("the model check must not touch the network")

    # "immediate" = decided from the local cache alone: any connection attempt fails the test
    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    with pytest.raises(ValueError, match="not in the Hugging Face cache"):
        HFPolicy("some-org/never-downloaded")


def test_callable_policy():
    pol = CallablePolicy(lambda row: _thesis("BUY" if row["ticker"] == "AAA" else "SELL"))
    assert [decision_of(c) for c in pol.decide([_row(), _row(ticker="BBB")])] == ["BUY", "SELL"]


def test_score_rows_confusion_and_reasoning_metrics_with_stub_scorer():
    rows = [_row(label="BUY"), _row(label="BUY"), _row(label="SELL"), _row(label="HOLD"), _row(label=None)]
    comps = [_thesis("BUY"), _thesis("STRONG_BUY"), _thesis("SELL"), "garbage", _thesis("HOLD")]

    def stub(completion, row):
        return {
            "hallucination_rate": 0.5 if "garbage" in completion else 0.0,
            "evidence": 0.8,
            "loop": 0.0,
            "note": "skip-me",
        }

    scores = score_rows(comps, rows, scorer=stub)
    assert scores["decision"].tolist() == ["BUY", "STRONG_BUY", "SELL", INVALID, "HOLD"]
    assert "note" not in scores.columns  # only numeric diagnostics are kept
    cm = confusion_matrix(scores)
    assert list(cm.index) == list(LABELS) and list(cm.columns) == [*LABELS, INVALID]
    assert cm.loc["BUY", "BUY"] == 1 and cm.loc["BUY", "STRONG_BUY"] == 1 and cm.loc["HOLD", INVALID] == 1
    assert cm.to_numpy().sum() == 4  # the unlabeled row is not in the matrix
    m = reasoning_metrics(scores)
    assert m["decision_accuracy"] == pytest.approx(2 / 4)
    assert m["direction_accuracy"] == pytest.approx(3 / 4)
    assert m["invalid_decision_rate"] == pytest.approx(1 / 5)
    assert m["hallucination_rate"] == pytest.approx(0.1)
    assert m["grounding"] == pytest.approx(0.8)
    assert m["loop_rate"] == 0.0


def test_score_rows_length_mismatch():
    with pytest.raises(ValueError, match="2 completions for 1 rows"):
        score_rows(["a", "b"], [_row()], scorer=lambda c, r: {})


# --- OpenAI-compatible endpoint ------------------------------------------------------------------------
class _Handler(BaseHTTPRequestHandler):
    seen: list[dict] = []

    def do_POST(self):  # noqa: N802 - http.server naming
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _Handler.seen.append(body)
        user = body["messages"][-1]["content"]
        if "FAIL" in user:
            self.send_response(400)
            self.end_headers()
            self.wfile.write(b'{"error": {"message": "bad request"}}')
            return
        text = _thesis("STRONG_BUY" if "AAA" in user else "STRONG_SELL")
        payload = {
            "id": "x",
            "object": "chat.completion",
            "created": 0,
            "model": body["model"],
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
            ],
            "usage": {"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12},
        }
        data = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


def test_openai_policy_against_a_local_server():
    server = HTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        pol = OpenAIPolicy(
            f"http://127.0.0.1:{server.server_port}/v1", "fake-model", max_tokens=64, concurrency=2
        )
        fail = _row(ticker="FAIL")
        out = pol.decide([_row(), _row(ticker="BBB"), fail])
        assert [decision_of(c) for c in out] == ["STRONG_BUY", "STRONG_SELL", INVALID]
        assert [e is not None for e in pol.last_errors] == [False, False, True]
        assert (
            _Handler.seen[0]["model"] == "fake-model" and _Handler.seen[0]["messages"][0]["role"] == "system"
        )
    finally:
        server.shutdown()


# --- transformers --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory):
    pytest.importorskip("transformers")
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    corpus = [SYSTEM_PROMPT, _thesis("BUY"), _row()["prompt_text"]] * 3
    tk = Tokenizer(models.BPE(unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.train_from_iterator(
        corpus,
        trainers.BpeTrainer(
            vocab_size=300, special_tokens=["<unk>", "<|endoftext|>", "<|im_start|>", "<|im_end|>"]
        ),
    )
    tok = PreTrainedTokenizerFast(
        tokenizer_object=tk, unk_token="<unk>", pad_token="<|endoftext|>", eos_token="<|im_end|>"
    )
    tok.chat_template = "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    cfg = Qwen2Config(
        vocab_size=len(tok),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=2048,
        pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id,
    )
    import torch

    torch.manual_seed(0)
    model = Qwen2ForCausalLM(cfg)
    out = tmp_path_factory.mktemp("tiny")
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out


def test_hf_policy_generates_one_completion_per_row_deterministically(tiny_model_dir):
    pol = HFPolicy(
        tiny_model_dir, max_new_tokens=6, batch_size=2, temperature=0.0, device="cpu", use_vllm=False
    )
    rows = [_row(), _row(ticker="BBB"), _row(ticker="CCCC")]
    a = pol.decide(rows)
    b = pol.decide(rows)
    assert len(a) == 3 and all(isinstance(x, str) for x in a)
    assert a == b  # greedy decoding is deterministic
    # left padding: a row's output does not depend on its batch neighbours
    assert pol.decide(rows[2:3]) == a[2:3]
    assert decision_of(a[0]) == INVALID  # an untrained model writes no thesis; scored as invalid


def _tiny_drafts_setup(tiny_model_dir, **policy):
    pol = HFPolicy(tiny_model_dir, max_new_tokens=12, batch_size=2, temperature=0.0, device="cpu", use_vllm=False,
                   **policy)
    rows = [_row(), _row(ticker="BBB"), _row(ticker="CCCC"), _row(asof="2024-01-05")]
    return pol, rows, pol.decide(rows)


def _decoding_steps(pol) -> list[int]:
    """A counter of the model's own forward calls: one per decoded token of a batch (a draft is checked
    through the backbone, outside it)."""
    steps = [0]
    pol._model.register_forward_hook(lambda *_: steps.__setitem__(0, steps[0] + 1))
    return steps


def test_greedy_decoding_from_drafts_gives_the_plain_theses_and_skips_decoding_what_it_checks(tiny_model_dir):
    """Right, empty, cut, wrong-in-the-middle and unrelated drafts all give the same greedy theses as plain
    decoding; the right drafts leave almost nothing to decode."""
    pol, rows, plain = _tiny_drafts_setup(tiny_model_dir)
    steps = _decoding_steps(pol)
    assert pol.decide(rows) == plain
    plain_steps, steps[0] = steps[0], 0
    assert pol.decide(rows, drafts=plain) == plain
    # the random model's text does not re-tokenize into the tokens it wrote: decoding resumes where they part
    assert steps[0] < plain_steps / 2
    tok = pol._tok
    ids = [tok(t, add_special_tokens=False)["input_ids"] for t in plain]
    cut = [tok.decode(i[:len(i) // 2]) for i in ids]
    wrong = [tok.decode([*i[:3], (i[3] + 1) % len(tok), *i[4:]]) for i in ids]
    for drafts in (["", "", "", ""], cut, wrong, plain[::-1], [p + " and more" for p in plain]):
        assert pol.decide(rows, drafts=drafts) == plain
    with pytest.raises(ValueError, match="4 drafts for 3"):
        pol.decide(rows[:3], drafts=plain)


def test_drafts_are_not_checked_where_greedy_is_not_the_plain_argmax(tiny_model_dir):
    """A generation config with a repetition penalty changes the greedy pick: decode as without drafts."""
    pol, rows, _ = _tiny_drafts_setup(tiny_model_dir)
    pol._model.generation_config.repetition_penalty = 1.5
    try:
        steps = _decoding_steps(pol)
        penalised = pol.decide(rows)
        plain_steps, steps[0] = steps[0], 0
        assert pol.decide(rows, drafts=penalised) == penalised and steps[0] == plain_steps
    finally:
        pol._model.generation_config.repetition_penalty = 1.0


def test_a_lora_model_decodes_from_drafts_through_its_adapters(tiny_model_dir):
    """A PEFT model's `base_model` is its LoRA wrapper: the draft check must run the decoder that holds
    the adapters, and give the adapted model's own greedy theses."""
    import torch
    from peft import LoraConfig, get_peft_model

    from thesisgym.train.generation import generate_theses

    pol, rows, base = _tiny_drafts_setup(tiny_model_dir)
    torch.manual_seed(0)
    lora = get_peft_model(pol._model, LoraConfig(r=4, target_modules="all-linear", task_type="CAUSAL_LM"))
    for name, param in lora.named_parameters():  # a trained adapter: B is not zero
        if "lora_B" in name:
            torch.nn.init.normal_(param, std=0.5)
    plain = generate_theses(lora, pol._tok, rows, max_new_tokens=12, batch_size=2)
    assert plain != base  # the adapters change what the model writes
    assert generate_theses(lora, pol._tok, rows, max_new_tokens=12, batch_size=2, drafts=plain) == plain
    cut = [p[: len(p) // 2] for p in plain]
    assert generate_theses(lora, pol._tok, rows, max_new_tokens=12, batch_size=2, drafts=cut) == plain


def test_remembering_policy_passes_drafts_for_the_rows_it_has_not_written():
    class Inner:
        name = "inner"
        seen: list = []

        def decide(self, rows, drafts=None):
            self.seen.append(drafts)
            return [f"thesis {r['ticker']}" for r in rows]

    pol = RememberingPolicy(Inner())
    rows = [_row(), _row(ticker="BBB")]
    assert pol.decide(rows[:1]) == ["thesis AAA"]
    assert pol.decide(rows, drafts=["draft A", "draft B"]) == ["thesis AAA", "thesis BBB"]
    assert Inner.seen == [None, ["draft B"]]
    with pytest.raises(ValueError, match="1 drafts for 2 rows"):
        pol.decide(rows, drafts=["x"])


def test_hf_policy_without_prompt_raises(tiny_model_dir):
    pol = HFPolicy(tiny_model_dir, max_new_tokens=2, use_vllm=False, device="cpu")
    with pytest.raises(ValueError, match="row 0"):
        pol.decide([{"ticker": "A", "asof": "2024-01-01"}])


def test_numeric_scores_are_float():
    scores = score_rows([_thesis("BUY")], [_row()], scorer=lambda c, r: {"x": np.float32(0.5), "flag": True})
    assert scores["x"].dtype == float and "flag" not in scores.columns
    assert isinstance(scores, pd.DataFrame)
