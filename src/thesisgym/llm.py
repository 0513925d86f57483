"""OpenAI-compatible chat client for judges and teachers: cache, retries, timeouts, concurrency, cost.

Every LLM call in thesisgym (the Trade-R1 consistency judge, the distillation teacher) goes through
`LLMClient`, because those calls happen inside long jobs (GRPO training, distilling thousands of rows)
where one flaky request must not kill the run and a rerun must not pay twice:

- works against any OpenAI-compatible endpoint (OpenAI, vLLM, Ollama, llama.cpp server) through the
  official `openai` package (`AsyncOpenAI`); the API key is read from an environment variable
  (default `OPENAI_API_KEY`) and a dummy key is used when it is unset, which local servers accept;
- bounded concurrency (one `asyncio.Semaphore` per event loop), a per-request timeout, and exponential
  backoff with full jitter on 429 / 5xx / timeouts / connection errors, up to `max_retries`
  (other 4xx are not retried: they will not get better);
- an on-disk sqlite cache keyed by sha256(model + messages + params) in WAL mode with one connection per
  process (re-opened after a fork), so concurrent readers and a writer in other processes coexist;
- a usage counter (requests, cache hits, retries, failures and the last failure's message, tokens
  from the responses' `usage`, cost from configurable prices per 1k tokens), so callers can report
  transport errors apart from bad answers;
- `ajson(...)`: a structured JSON answer validated with a pydantic model; a malformed answer is retried
  (`json_attempts`), then the caller's fallback is returned with a logged warning counted in
  `usage.json_fallbacks`. Transport failures also end in the fallback there: never a crash mid-training;
- sync wrappers (`chat`, `chat_batch`, `json_batch`) for non-async callers: they run the batch in a
  fresh event loop, or in a helper thread when the caller already runs a loop (Jupyter, async trainers).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import json
import logging
import os
import random
import re
import sqlite3
import threading
import time
import weakref
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, Field, ValidationError

from thesisgym.schema import StrictModel

logger = logging.getLogger(__name__)

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)

DUMMY_API_KEY = "sk-thesisgym-local"  # local servers ignore the key but the client requires one
DEFAULT_CACHE_PATH = "~/.cache/thesisgym/llm_cache.sqlite"


class LLMError(RuntimeError):
    """A request failed for good: retries exhausted or a non-retryable HTTP status."""


class LLMConfig(StrictModel):
    """Settings of an `LLMClient`. Every field can be overridden by keyword in `LLMClient(...)`."""

    model: str = Field(description="model name sent to the endpoint")
    base_url: str | None = Field(default=None, description="e.g. http://localhost:8000/v1; None = OpenAI")
    api_key_env: str = Field(default="OPENAI_API_KEY", description="env var holding the API key")
    timeout: float = Field(default=60.0, gt=0, description="seconds per request attempt")
    max_retries: int = Field(default=4, ge=0, description="retries on 429/5xx/timeouts after the first try")
    backoff_base: float = Field(default=0.5, ge=0, description="first backoff in seconds, doubled per retry")
    backoff_max: float = Field(default=20.0, ge=0, description="cap of one backoff sleep in seconds")
    concurrency: int = Field(default=8, ge=1, description="max requests in flight per event loop")
    cache_path: str | None = Field(default=DEFAULT_CACHE_PATH, description="sqlite file; None disables")
    price_prompt_per_1k: float = Field(default=0.0, ge=0, description="cost per 1k prompt tokens")
    price_completion_per_1k: float = Field(default=0.0, ge=0, description="cost per 1k completion tokens")
    json_attempts: int = Field(default=2, ge=1, description="tries of ajson before its fallback")


@dataclass
class Usage:
    """Counters of one client; read with `client.usage`, cleared with `client.reset_usage()`."""

    requests: int = 0  # HTTP attempts, retries included
    cache_hits: int = 0
    retries: int = 0
    failures: int = 0  # calls that ended in LLMError
    json_fallbacks: int = 0  # ajson calls that returned the fallback
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    last_error: str = ""  # the message of the latest call that failed for good ("" if none)

    def as_dict(self) -> dict[str, float | str]:
        return asdict(self)


class ChatCache:
    """sqlite cache of chat answers: key -> JSON list of choice texts. WAL, one connection per process."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path).expanduser()
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._pid = -1

    def _connection(self) -> sqlite3.Connection:
        # A connection must not cross a fork; reopen in a child process.
        if self._conn is None or self._pid != os.getpid():
            self.path.parent.mkdir(parents=True, exist_ok=True)  # created on first use, not at import
            conn = sqlite3.connect(self.path, timeout=30.0, check_same_thread=False, isolation_level=None)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute(
                "CREATE TABLE IF NOT EXISTS chat (key TEXT PRIMARY KEY, value TEXT NOT NULL, created REAL)"
            )
            self._conn, self._pid = conn, os.getpid()
        return self._conn

    def get(self, key: str) -> list[str] | None:
        with self._lock:
            row = self._connection().execute("SELECT value FROM chat WHERE key = ?", (key,)).fetchone()
        return None if row is None else json.loads(row[0])

    def put(self, key: str, texts: list[str]) -> None:
        with self._lock:
            self._connection().execute(
                "INSERT OR REPLACE INTO chat (key, value, created) VALUES (?, ?, ?)",
                (key, json.dumps(texts), time.time()),
            )

    def __len__(self) -> int:
        with self._lock:
            return int(self._connection().execute("SELECT COUNT(*) FROM chat").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None


def cache_key(model: str, messages: Sequence[dict], params: dict[str, Any]) -> str:
    """Stable hash of everything that determines an answer."""
    blob = json.dumps({"model": model, "messages": list(messages), "params": params}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


_JSON_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)


def extract_json(text: str) -> Any:
    """Parse the JSON object in an answer: whole text, a ```json fence, or the outermost {...} span."""
    text = text.strip()
    candidates = [text]
    candidates += [m.group(1).strip() for m in _JSON_FENCE.finditer(text)]
    lo, hi = text.find("{"), text.rfind("}")
    if 0 <= lo < hi:
        candidates.append(text[lo : hi + 1])
    for cand in candidates:
        try:
            return json.loads(cand)
        except (json.JSONDecodeError, ValueError):
            continue
    raise ValueError(f"no JSON object in answer: {text[:120]!r}")


def run_sync(factory: Callable[[], Awaitable[T]]) -> T:
    """Run a coroutine from sync code; in a helper thread with its own loop if a loop is running here."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(factory())
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(lambda: asyncio.run(factory())).result()


class _LoopState:
    """Per-event-loop client and semaphore: both bind to the loop they are first used in."""

    def __init__(self, client: Any, semaphore: asyncio.Semaphore) -> None:
        self.client = client
        self.semaphore = semaphore
        self.inflight: dict[str, asyncio.Task] = {}  # cache key -> the request already on its way


class LLMClient:
    """OpenAI-compatible chat client with cache, retries, timeouts, concurrency and a cost counter.

    >>> llm = LLMClient(model="qwen2.5-7b", base_url="http://localhost:8000/v1")
    >>> llm.chat([{"role": "user", "content": "hi"}])[0]
    """

    def __init__(self, config: LLMConfig | None = None, **overrides: Any) -> None:
        if config is None:
            if "model" not in overrides:
                raise TypeError("LLMClient needs a model: LLMClient(model=..., base_url=...)")
            config = LLMConfig(**overrides)
        elif overrides:
            config = LLMConfig(**{**config.model_dump(), **overrides})  # validated like a fresh config
        self.config = config
        self.usage = Usage()
        self.cache = ChatCache(config.cache_path) if config.cache_path else None
        self._states: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopState] = (
            weakref.WeakKeyDictionary()
        )
        self._usage_lock = threading.Lock()

    # --- plumbing ------------------------------------------------------------------------------
    def _state(self) -> _LoopState:
        loop = asyncio.get_running_loop()
        state = self._states.get(loop)
        if state is None:
            from openai import AsyncOpenAI

            api_key = os.environ.get(self.config.api_key_env) or DUMMY_API_KEY
            # Retries are ours (with jitter and counting), so the SDK's own are off.
            client = AsyncOpenAI(
                base_url=self.config.base_url, api_key=api_key, timeout=self.config.timeout, max_retries=0
            )
            state = _LoopState(client, asyncio.Semaphore(self.config.concurrency))
            self._states[loop] = state
        return state

    def _count(self, **deltas: float) -> None:
        with self._usage_lock:
            for name, delta in deltas.items():
                setattr(self.usage, name, getattr(self.usage, name) + delta)

    async def aclose(self) -> None:
        """Close the HTTP client bound to the running loop (the sync wrappers do this themselves)."""
        state = self._states.pop(asyncio.get_running_loop(), None)
        if state is not None:
            await state.client.close()

    def run(self, factory: Callable[[], Awaitable[T]]) -> T:
        """Run `factory()` to completion from sync code (see `run_sync`) and close the connections it
        opened, so thousands of sync calls (a long distillation) do not pile up sockets."""

        async def main() -> T:
            try:
                return await factory()
            finally:
                await self.aclose()

        return run_sync(main)

    def reset_usage(self) -> None:
        self.usage = Usage()

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        cap = min(self.config.backoff_max, self.config.backoff_base * (2**attempt))
        delay = random.uniform(0, cap)  # full jitter: retries of a batch do not stampede together
        if retry_after is not None:
            delay = max(delay, min(retry_after, self.config.backoff_max))
        return delay

    @staticmethod
    def _retryable(exc: BaseException) -> tuple[bool, float | None]:
        import openai

        if isinstance(exc, (openai.APITimeoutError, openai.APIConnectionError, asyncio.TimeoutError)):
            return True, None
        if isinstance(exc, openai.APIStatusError):
            status = exc.status_code
            if status == 429 or status >= 500:
                retry_after = None
                try:
                    header = exc.response.headers.get("retry-after")
                    retry_after = float(header) if header is not None else None
                except (TypeError, ValueError):
                    retry_after = None
                return True, retry_after
        return False, None

    # --- async API ---------------------------------------------------------------------------
    async def achat(
        self,
        messages: Sequence[dict],
        *,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        n: int = 1,
        seed: int | None = None,
        use_cache: bool = True,
        **params: Any,
    ) -> list[str]:
        """Return the `n` choice texts of one chat completion. Raises LLMError when it fails for good."""
        messages = [dict(m) for m in messages]
        request = {"temperature": temperature, "n": n, **params}
        if max_tokens is not None:
            request["max_tokens"] = max_tokens
        if seed is not None:
            request["seed"] = seed
        key = cache_key(self.config.model, messages, request)
        if use_cache and self.cache is not None:
            hit = self.cache.get(key)
            if hit is not None:
                self._count(cache_hits=1)
                return hit
        state = self._state()
        if not use_cache:
            return await self._request(state, key, messages, request, store=False)
        # Identical concurrent requests (a GRPO group often holds duplicate completions) share one call.
        task = state.inflight.get(key)
        if task is None:
            task = asyncio.ensure_future(self._request(state, key, messages, request, store=True))
            state.inflight[key] = task
            task.add_done_callback(lambda _t: state.inflight.pop(key, None))
        else:
            self._count(cache_hits=1)
        return list(await asyncio.shield(task))

    async def _request(
        self, state: _LoopState, key: str, messages: list[dict], request: dict[str, Any], *, store: bool
    ) -> list[str]:
        last: BaseException | None = None
        for attempt in range(self.config.max_retries + 1):
            try:
                async with state.semaphore:
                    self._count(requests=1)
                    # The SDK timeout covers reads; wait_for is the hard deadline for a hung server.
                    response = await asyncio.wait_for(
                        state.client.chat.completions.create(
                            model=self.config.model, messages=messages, **request
                        ),
                        timeout=self.config.timeout + 1.0,
                    )
            except Exception as exc:  # noqa: BLE001 - classified just below
                retry, retry_after = self._retryable(exc)
                last = exc
                if not retry or attempt == self.config.max_retries:
                    break
                self._count(retries=1)
                await asyncio.sleep(self._backoff(attempt, retry_after))
                continue
            texts = [(choice.message.content or "") for choice in response.choices]
            self._record_usage(getattr(response, "usage", None))
            if store and self.cache is not None:
                self.cache.put(key, texts)
            return texts
        self._count(failures=1)
        message = f"{self.config.model} @ {self.config.base_url}: {type(last).__name__}: {last}"
        with self._usage_lock:
            self.usage.last_error = message
        raise LLMError(message) from last

    def _record_usage(self, usage: Any) -> None:
        if usage is None:
            return
        p = int(getattr(usage, "prompt_tokens", 0) or 0)
        c = int(getattr(usage, "completion_tokens", 0) or 0)
        cost = p / 1000 * self.config.price_prompt_per_1k + c / 1000 * self.config.price_completion_per_1k
        self._count(prompt_tokens=p, completion_tokens=c, cost=cost)

    async def achat_batch(
        self, batch: Sequence[Sequence[dict]], *, return_exceptions: bool = True, **kwargs: Any
    ) -> list[list[str] | LLMError]:
        """Run many chats concurrently (bounded by `concurrency`); failures come back as LLMError."""
        results = await asyncio.gather(
            *(self.achat(m, **kwargs) for m in batch), return_exceptions=return_exceptions
        )
        out: list[list[str] | LLMError] = []
        for r in results:
            if isinstance(r, BaseException) and not isinstance(r, LLMError):
                out.append(LLMError(f"{type(r).__name__}: {r}"))
            else:
                out.append(r)
        return out

    async def ajson(
        self,
        messages: Sequence[dict],
        schema: type[M],
        *,
        fallback: M | None = None,
        **kwargs: Any,
    ) -> M | None:
        """A pydantic-validated JSON answer; after `json_attempts` bad answers or a failed request, the
        `fallback` (default None) with a logged warning counted in `usage.json_fallbacks`."""
        messages = list(messages)
        use_cache = kwargs.pop("use_cache", True)
        problem = ""
        for attempt in range(self.config.json_attempts):
            call_kwargs = dict(kwargs)
            if attempt:
                # A distinct seed makes a distinct cache key (the malformed answer is not served again)
                # and varies sampling; a rerun then replays both answers from the cache for free.
                call_kwargs["seed"] = int(kwargs.get("seed") or 0) + 7919 * attempt
            try:
                text = (await self.achat(messages, use_cache=use_cache, **call_kwargs))[0]
            except LLMError as exc:
                problem = str(exc)
                break
            try:
                return schema.model_validate(extract_json(text))
            except (ValueError, ValidationError) as exc:
                problem = f"malformed answer ({type(exc).__name__}): {str(exc)[:200]}"
        self._count(json_fallbacks=1)
        logger.warning(
            "LLM JSON answer failed (%s); using the fallback (%d so far)", problem, self.usage.json_fallbacks
        )
        return fallback

    async def ajson_batch(
        self, batch: Sequence[Sequence[dict]], schema: type[M], *, fallback: M | None = None, **kwargs: Any
    ) -> list[M | None]:
        return list(await asyncio.gather(*(self.ajson(m, schema, fallback=fallback, **kwargs) for m in batch)))

    # --- sync API ----------------------------------------------------------------------------
    def chat(self, messages: Sequence[dict], **kwargs: Any) -> list[str]:
        return self.run(lambda: self.achat(messages, **kwargs))

    def chat_batch(self, batch: Sequence[Sequence[dict]], **kwargs: Any) -> list[list[str] | LLMError]:
        return self.run(lambda: self.achat_batch(batch, **kwargs))

    def json_batch(
        self, batch: Sequence[Sequence[dict]], schema: type[M], *, fallback: M | None = None, **kwargs: Any
    ) -> list[M | None]:
        return self.run(lambda: self.ajson_batch(batch, schema, fallback=fallback, **kwargs))
