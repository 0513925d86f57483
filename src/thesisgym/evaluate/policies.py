"""Policies (anything that writes theses for dataset rows) and the reasoning metrics of their output.

A policy is `decide(rows) -> list[str]`: one completion per dataset row, in order. Evaluation is
then the same whatever produced the text:

- `JsonlPolicy(path)`: completions precomputed elsewhere, one JSON object per line with
  `completion` (str or chat messages) and either `ticker` + `asof` (+ `variation`, default 0, and
  `probe`, default "") or an `index` / the line number. A row without a completion raises.
- `HFPolicy(model_path, ...)`: transformers `generate` (chat template when the tokenizer has one,
  left padding, batched); uses vLLM instead when it is installed, a GPU is present and
  `use_vllm` is not False.
- `OpenAIPolicy(base_url, model, ...)`: any OpenAI-compatible endpoint through `thesisgym.llm.LLMClient`
  (cache, retries, timeouts, concurrency); a request that fails for good becomes an empty completion
  counted in `failures` (an empty thesis scores as invalid, which is what it is).
- `CallablePolicy(fn)`: `fn(row) -> str`, for tests and quick experiments.

`reasoning_metrics(completions, rows)` turns completions into per-row scores (through
`thesisgym.rewards.score_completion` when available) and aggregates: hallucination rate, grounding,
decision accuracy, 5x5 confusion matrix (rows = truth, columns = prediction, schema.LABELS order),
loop rate and invalid-decision rate.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
import pandas as pd

from thesisgym.schema import LABELS

INVALID = "INVALID"


@runtime_checkable
class Policy(Protocol):
    """Writes one completion per dataset row."""

    name: str

    def decide(self, rows: Sequence[dict]) -> list[str]: ...


# --- text helpers ------------------------------------------------------------------------------------
_DECISION_RE = re.compile(r"<\s*decision\s*>\s*([A-Za-z _-]+?)\s*<\s*/\s*decision\s*>", re.I)


def completion_to_text(completion: Any) -> str:
    try:
        from thesisgym.thesis import completion_text
    except ImportError:  # pragma: no cover - the thesis module ships with the package
        return completion if isinstance(completion, str) else ""
    return completion_text(completion)


def decision_of(completion: Any) -> str:
    """The valid decision of a completion, or INVALID (missing, unknown or repeated)."""
    text = completion_to_text(completion)
    try:
        from thesisgym.thesis import parse_thesis
    except ImportError:  # pragma: no cover
        found = _DECISION_RE.findall(text)
        label = found[-1].strip().upper().replace(" ", "_").replace("-", "_") if len(found) == 1 else ""
        return label if label in LABELS else INVALID
    dec = parse_thesis(text).decision
    return dec if dec in LABELS else INVALID


# --- policies ------------------------------------------------------------------------------------------
def _row_key(row: dict) -> tuple[str, str, int, str]:
    return (
        str(row["ticker"]),
        str(row["asof"])[:10],
        int(row.get("variation", 0) or 0),
        str(row.get("probe", "") or ""),
    )


class CallablePolicy:
    def __init__(self, fn: Callable[[dict], str], *, name: str = "callable") -> None:
        self.fn = fn
        self.name = name

    def decide(self, rows: Sequence[dict]) -> list[str]:
        return [completion_to_text(self.fn(row)) for row in rows]


class JsonlPolicy:
    """Completions read from a JSONL file (e.g. written by an earlier `thesisgym evaluate`)."""

    def __init__(self, path: str | Path, *, name: str | None = None) -> None:
        self.path = Path(path)
        self.name = name or self.path.stem
        if not self.path.exists():
            raise ValueError(f"{self.path}: completions file does not exist")
        self.by_key: dict[tuple[str, str, int, str], str] = {}
        self.by_index: list[str] = []
        for lineno, line in enumerate(self.path.read_text().splitlines(), start=1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{self.path}:{lineno}: not valid JSON ({exc.msg})") from None
            if not isinstance(rec, dict) or "completion" not in rec:
                raise ValueError(f"{self.path}:{lineno}: expected an object with a 'completion' field")
            text = completion_to_text(rec["completion"])
            if "ticker" in rec and "asof" in rec:
                key = _row_key(rec)
                if key in self.by_key:
                    raise ValueError(f"{self.path}:{lineno}: duplicate completion for {key}")
                self.by_key[key] = text
            else:
                idx = int(rec.get("index", len(self.by_index)))
                if idx != len(self.by_index):
                    raise ValueError(
                        f"{self.path}:{lineno}: index {idx} out of order (expected {len(self.by_index)})"
                    )
                self.by_index.append(text)
        self.probes = {k[3] for k in self.by_key}

    def supports_probe(self, probe: str) -> bool:
        return probe in self.probes

    def decide(self, rows: Sequence[dict]) -> list[str]:
        out = []
        for i, row in enumerate(rows):
            if self.by_key:
                key = _row_key(row)
                if key not in self.by_key:
                    raise ValueError(f"{self.path}: no completion for row {i} {key}")
                out.append(self.by_key[key])
            else:
                if "probe" in row and row["probe"]:
                    raise ValueError(
                        f"{self.path}: index-keyed completions cannot answer probe {row['probe']!r}"
                    )
                if i >= len(self.by_index):
                    raise ValueError(
                        f"{self.path}: no completion for row {i} (file has {len(self.by_index)})"
                    )
                out.append(self.by_index[i])
        return out


class HFPolicy:
    """Generate with a local/HF causal LM (transformers; vLLM when available on a GPU)."""

    def __init__(
        self,
        model_path: str | Path,
        *,
        max_new_tokens: int = 1024,
        batch_size: int = 8,
        temperature: float = 0.0,
        device: str | None = None,
        use_vllm: bool | None = None,
        seed: int = 0,
        name: str | None = None,
    ) -> None:
        self.model_path = str(model_path)
        self.max_new_tokens = max_new_tokens
        self.batch_size = batch_size
        self.temperature = temperature
        self.device = device
        self.use_vllm = use_vllm
        self.seed = seed
        self.name = name or Path(self.model_path).name
        self._model = None
        self._tok = None

    def _want_vllm(self) -> bool:
        if self.use_vllm is False:
            return False
        try:
            import torch
            import vllm  # noqa: F401
        except ImportError:
            if self.use_vllm:
                raise ValueError("use_vllm=True but vllm is not installed (pip install vllm)") from None
            return False
        return bool(self.use_vllm) or torch.cuda.is_available()

    def _prompt_texts(self, rows: Sequence[dict], tok: Any) -> list[str]:
        texts = []
        for i, row in enumerate(rows):
            if getattr(tok, "chat_template", None) and row.get("prompt"):
                texts.append(
                    tok.apply_chat_template(list(row["prompt"]), tokenize=False, add_generation_prompt=True)
                )
            elif row.get("prompt_text"):
                texts.append(str(row["prompt_text"]))
            else:
                raise ValueError(
                    f"row {i}: neither a chat prompt (with a chat template) nor prompt_text to generate from"
                )
        return texts

    def _decide_vllm(self, rows: Sequence[dict]) -> list[str]:  # pragma: no cover - needs a GPU + vllm
        from vllm import LLM, SamplingParams

        if self._model is None:
            self._model = LLM(model=self.model_path, seed=self.seed)
        tok = self._model.get_tokenizer()
        params = SamplingParams(temperature=self.temperature, max_tokens=self.max_new_tokens, seed=self.seed)
        outs = self._model.generate(self._prompt_texts(rows, tok), params)
        return [o.outputs[0].text for o in outs]

    def decide(self, rows: Sequence[dict]) -> list[str]:
        if self._want_vllm():
            return self._decide_vllm(rows)
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if self._model is None:
            self._tok = AutoTokenizer.from_pretrained(self.model_path)
            self._tok.padding_side = "left"
            if self._tok.pad_token is None:
                self._tok.pad_token = self._tok.eos_token
            device = self.device or ("cuda" if torch.cuda.is_available() else "cpu")
            self._model = AutoModelForCausalLM.from_pretrained(self.model_path).to(device).eval()
        tok, model = self._tok, self._model
        texts = self._prompt_texts(rows, tok)
        # a chat template already writes BOS and role markers; raw prompt_text needs the tokenizer's own
        templated = bool(getattr(tok, "chat_template", None))
        torch.manual_seed(self.seed)
        out: list[str] = []
        gen_kwargs: dict[str, Any] = {"max_new_tokens": self.max_new_tokens, "pad_token_id": tok.pad_token_id}
        if self.temperature > 0:
            gen_kwargs.update(do_sample=True, temperature=self.temperature)
        else:
            gen_kwargs.update(do_sample=False)
        for lo in range(0, len(texts), self.batch_size):
            batch = tok(
                texts[lo : lo + self.batch_size],
                return_tensors="pt",
                padding=True,
                add_special_tokens=not templated,
            )
            batch = {k: v.to(model.device) for k, v in batch.items()}
            with torch.no_grad():
                ids = model.generate(**batch, **gen_kwargs)
            new = ids[:, batch["input_ids"].shape[1] :]
            out.extend(tok.batch_decode(new, skip_special_tokens=True))
        return out


class OpenAIPolicy:
    """Completions from an OpenAI-compatible endpoint (OpenAI, vLLM serve, Ollama, llama.cpp)."""

    def __init__(
        self,
        base_url: str | None,
        model: str,
        *,
        api_key_env: str = "OPENAI_API_KEY",
        temperature: float = 0.0,
        max_tokens: int = 2048,
        concurrency: int = 8,
        timeout: float = 120.0,
        cache_path: str | None = None,
        name: str | None = None,
    ) -> None:
        from thesisgym.llm import LLMClient

        self.client = LLMClient(
            model=model,
            base_url=base_url,
            api_key_env=api_key_env,
            concurrency=concurrency,
            timeout=timeout,
            cache_path=cache_path,
        )
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.name = name or model
        self.failures = 0

    def decide(self, rows: Sequence[dict]) -> list[str]:
        batch = []
        for i, row in enumerate(rows):
            if not row.get("prompt"):
                raise ValueError(f"row {i}: no chat prompt to send")
            batch.append(list(row["prompt"]))
        results = self.client.chat_batch(batch, temperature=self.temperature, max_tokens=self.max_tokens)
        out = []
        for r in results:
            if isinstance(r, BaseException):
                self.failures += 1
                out.append("")
            else:
                out.append(r[0] if r else "")
        return out


# --- reasoning metrics --------------------------------------------------------------------------------
def default_scorer() -> Callable[[Any, dict], dict[str, float]] | None:
    try:
        from thesisgym.rewards import score_completion
    except ImportError:
        return None
    return score_completion


def score_rows(
    completions: Sequence[str], rows: Sequence[dict], *, scorer: Callable[[Any, dict], dict] | None = None
) -> pd.DataFrame:
    """One row per completion: decision, label, correct, plus every float the scorer reports."""
    if len(completions) != len(rows):
        raise ValueError(f"{len(completions)} completions for {len(rows)} rows")
    scorer = scorer or default_scorer()
    records = []
    for comp, row in zip(completions, rows, strict=True):
        rec: dict[str, Any] = {
            "ticker": row.get("ticker"),
            "asof": str(row.get("asof", ""))[:10],
            "variation": int(row.get("variation", 0) or 0),
            "decision": decision_of(comp),
            "label": row.get("label"),
        }
        if scorer is not None:
            for k, v in (scorer(comp, row) or {}).items():
                if isinstance(v, (int, float, np.floating, np.integer)) and not isinstance(v, bool):
                    # the scorer's "decision" is a reward value; ours is the label string
                    rec[f"{k}_reward" if k in rec else k] = float(v)
        records.append(rec)
    return pd.DataFrame.from_records(records)


def confusion_matrix(scores: pd.DataFrame) -> pd.DataFrame:
    """Counts, rows = true label, columns = predicted decision (LABELS order + INVALID)."""
    cols = [*LABELS, INVALID]
    cm = pd.DataFrame(0, index=list(LABELS), columns=cols, dtype=int)
    known = scores[scores["label"].isin(LABELS)]
    for (truth, pred), n in known.groupby(["label", "decision"]).size().items():
        cm.loc[truth, pred] = int(n)
    cm.index.name, cm.columns.name = "truth", "prediction"
    return cm


def _mean(scores: pd.DataFrame, *names: str) -> float:
    for name in names:
        if name in scores.columns:
            vals = scores[name].to_numpy(dtype=float)
            vals = vals[np.isfinite(vals)]
            return float(vals.mean()) if len(vals) else float("nan")
    return float("nan")


def _placeholder_s(scores: pd.DataFrame) -> bool:
    if "s_is_placeholder" not in scores.columns:
        return False
    flags = scores["s_is_placeholder"].to_numpy(dtype=float)
    return bool(len(flags)) and bool(np.all(flags[np.isfinite(flags)] == 1))


def reasoning_metrics(scores: pd.DataFrame) -> dict[str, float]:
    """Aggregates of `score_rows`: the numbers a person checks before trusting a Sharpe ratio."""
    n = len(scores)
    labelled = scores[scores["label"].isin(LABELS)]
    valid = scores["decision"] != INVALID
    out = {
        "rows": float(n),
        "invalid_decision_rate": float((~valid).mean()) if n else float("nan"),
        "decision_accuracy": float((labelled["decision"] == labelled["label"]).mean())
        if len(labelled)
        else float("nan"),
        "hallucination_rate": _mean(scores, "hallucination_rate"),
        "grounding": _mean(scores, "grounding", "citation_precision", "evidence"),
        # `s` is only a consistency score when a judge produced it; the reward stack otherwise
        # fills it with the grounding placeholder (s_is_placeholder = 1), which is not reported as s
        "consistency": float("nan") if _placeholder_s(scores) else _mean(scores, "consistency", "s"),
        "loop_rate": _mean(scores, "loop_rate", "loop"),
    }
    if len(labelled):
        # direction accuracy: bullish/bearish/neutral side right, the coarser question a trader asks
        side = {lab: int(np.sign(i - 2)) for i, lab in enumerate(LABELS)}
        pred = labelled["decision"].map(side)
        truth = labelled["label"].map(side)
        out["direction_accuracy"] = float((pred == truth).mean())
    else:
        out["direction_accuracy"] = float("nan")
    return out
