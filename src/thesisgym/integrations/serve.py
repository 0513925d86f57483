"""`thesisgym serve`: the verifier as an HTTP reward service (FastAPI on uvicorn, loopback by default).

Why a service: a trainer on another machine (or in another Python) calls one URL instead of
importing thesisgym; OpenRLHF's remote reward model is exactly such a URL. Every route scores with
`thesisgym.integrations.core.score_batch`, the code path TRL, verl, verifiers and OpenRLHF use.

Routes
- `POST /score` `{"recipe"?: str, "items": [{"completion": str | [{role, content}], "row": {...}}
  | {"completion", "split"?, "index"} | {"completion", "split"?, "ticker", "asof", "variation"?}]}`
  -> `{"recipe", "n", "reward_errors", "results": [{"score", "reward/<name>", components...}]}`; not-applicable
  values are `null`. A `row` carries the verifier record inline (evidence, sections, label,
  fwd_return, fwd_vol; unknown keys are refused); `index`/`ticker`+`asof` name a row of the
  dataset given with `--dataset` (rows are converted once and cached by key).
- `POST /openrlhf` OpenRLHF's remote-RM payload `{"query", "prompts", "labels"}` ->
  `{"rewards", "scores", "extra_logs"}` (labels = the JSON verifier records of `thesisgym export`).
- `GET /healthz` (alive), `GET /readyz` (recipe built, dataset loaded), `GET /metrics` (Prometheus).

Limits: request bodies over `max_body_bytes` get 413 before they are read in full; batches over
`max_batch` get 413. At most `max_concurrency` batches score at once (`ScoringPool`: the slot belongs
to the worker thread and is freed only when the thread returns, so a timed-out request or a gone
client cannot open a slot early) and at most `max_queue` more wait; beyond that a request gets 503
`overloaded` with a Retry-After header, before its body is parsed (`EarlyRefusal`). A request not answered within `timeout_s` of
admission (queue wait included) gets 504; if its batch had not started it never scores, if it had
the thread finishes in the background, still holding its slot. `/score` answers carry
`reward_errors`: the errors recorded while scoring that request (never another request's), and
each result its own. Errors are JSON `{"error": {"type", "message"}}` with a 4xx/5xx status;
malformed JSON is 400, a schema error 422.
uvicorn stops gracefully on SIGTERM/SIGINT: it stops accepting, lets in-flight requests finish
(up to `--graceful` seconds), prints "thesisgym serve: stopped after scoring N completions" and
then exits by the same signal (uvicorn re-raises it); a response is only ever sent whole.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import math
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from thesisgym.integrations.core import (
    VerifierRecord,
    default_recipe,
    describe_errors,
    load_recipe,
    score_batch,
    verifier_record,
)
from thesisgym.rewards.base import counting_errors
from thesisgym.schema import StrictModel

__all__ = ["Saturated", "ScoringPool", "ServeConfig", "create_app"]


@dataclass
class ServeConfig:
    dataset: Path | None = None
    split: str = "train"
    recipe: str = field(default_factory=default_recipe)
    max_body_bytes: int = 8 * 1024 * 1024
    max_batch: int = 256
    timeout_s: float = 30.0
    max_concurrency: int = 4
    max_queue: int = 64
    row_cache: int = 4096

    def __post_init__(self) -> None:
        for name in ("max_body_bytes", "max_batch", "max_concurrency", "row_cache"):
            if int(getattr(self, name)) <= 0:
                raise ValueError(f"{name}: must be a positive integer, got {getattr(self, name)!r}")
        if int(self.max_queue) < 0:
            raise ValueError(f"max_queue: must be a non-negative integer, got {self.max_queue!r}")
        if not self.timeout_s > 0:
            raise ValueError(f"timeout_s: must be positive, got {self.timeout_s!r}")


# --- request schemas (extra="forbid": an unknown key is a 422 naming it) --------------------------
class _Strict(StrictModel, strict=True):
    """JSON bodies are not coerced either: "1" is not an int."""


class Message(_Strict):
    role: Literal["system", "user", "assistant"]
    content: str


class ScoreItem(_Strict):
    completion: str | list[Message]
    row: VerifierRecord | None = None
    split: str | None = None
    index: int | None = Field(None, ge=0)
    ticker: str | None = None
    asof: str | None = None
    variation: int = 0


class ScoreRequest(_Strict):
    recipe: str | None = None
    items: list[ScoreItem] = Field(min_length=1)


class OpenRLHFRequest(_Strict):
    query: list[str] = Field(min_length=1)
    prompts: list[str] | None = None
    labels: list[str]


class ServiceError(Exception):
    def __init__(self, status: int, kind: str, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.kind, self.message, self.headers = status, kind, message, headers


# --- dataset rows, cached by key ---------------------------------------------------------------
class RowStore:
    """Rows of a built dataset as VerifierRecords, converted on first use (bounded LRU by key).

    Called from the scoring threads: `_load_lock` guards the splits and their key indexes while one
    loads (a second thread waits instead of loading it again or reading a half-built index), `_lock`
    the LRU.
    """

    def __init__(self, path: Path | None, default_split: str, cache_size: int) -> None:
        self.path, self.default_split, self.cache_size = path, default_split, cache_size
        self._splits: dict[str, Any] = {}
        self._keys: dict[str, dict[tuple, int]] = {}
        self._cache: OrderedDict[tuple[str, int], VerifierRecord] = OrderedDict()
        self._lock = threading.Lock()
        self._load_lock = threading.Lock()
        if path is not None:
            from thesisgym.dataset.splits import load_split

            loaded = load_split(path, default_split)  # ValueError names the directory / split
            self._splits[default_split] = loaded
        self.hits = self.misses = 0

    def _split(self, split: str) -> Any:
        if self.path is None:
            raise ServiceError(422, "no_dataset", "items refer to dataset rows but the service was "
                               "started without --dataset; send the verifier record as 'row'")
        with self._load_lock:
            if split not in self._splits:
                from thesisgym.dataset.splits import load_split

                try:
                    self._splits[split] = load_split(self.path, split)
                except ValueError as exc:
                    raise ServiceError(422, "unknown_split", str(exc)) from None
            return self._splits[split]

    def _index(self, split: str) -> dict[tuple, int]:
        ds = self._split(split)
        with self._load_lock:
            if split not in self._keys:
                cols = ds.column_names
                variations = ds["variation"] if "variation" in cols else [0] * len(ds)
                self._keys[split] = {k: i for i, k in reversed(list(enumerate(zip(
                    ds["ticker"], ds["asof"], variations, strict=True))))}
            return self._keys[split]

    def index_of(self, split: str, ticker: str, asof: str, variation: int) -> int:
        keys = self._index(split)
        key = (ticker, asof, variation)
        if key not in keys:
            raise ServiceError(422, "unknown_row", f"split {split!r} has no row ticker={ticker!r} "
                               f"asof={asof!r} variation={variation}")
        return keys[key]

    def record(self, split: str, index: int) -> VerifierRecord:
        key = (split, index)
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
                self.hits += 1
                return hit
        ds = self._split(split)
        if not 0 <= index < len(ds):
            raise ServiceError(422, "unknown_row", f"split {split!r}: index {index} not in [0, {len(ds)})")
        record = verifier_record(ds[index], where=f"{self.path} [{split}] row {index}")
        with self._lock:
            self.misses += 1
            self._cache[key] = record
            if len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        return record


# --- the concurrency limit -------------------------------------------------------------------------
class Saturated(Exception):
    """Every scoring slot and every queue place is taken (the request gets 503 with Retry-After)."""

    def __init__(self, retry_after: int) -> None:
        super().__init__(f"retry after {retry_after} s")
        self.retry_after = retry_after


class ScoringPool:
    """The service's concurrency limit: at most `workers` batches score at once, `queue` more wait.

    The limit is owned by the threads, not by the requests: a slot is freed when its worker thread
    returns. A request that timed out (504) or whose client left keeps its slot until the scoring it
    started has ended, so the limit holds whatever clients do; a job still waiting when its request
    gives up is cancelled and never scores. Beyond `workers + queue` admitted batches `submit`
    raises Saturated with a Retry-After estimate (queue length x the recent batch time / workers).
    """

    def __init__(self, workers: int, queue: int) -> None:
        self.workers, self.capacity = workers, workers + queue
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="thesisgym-score")
        self._lock = threading.Lock()
        self.admitted = self.running = self.peak_running = 0
        self._batch_s = 0.0  # moving average of one batch's scoring time

    def submit(self, fn: Callable[[], Any]) -> Future:
        with self._lock:
            if self.admitted >= self.capacity:
                raise self._refusal()
            self.admitted += 1
        try:  # the job runs in a copy of the caller's context (strict mode, error tallies)
            future = self._pool.submit(contextvars.copy_context().run, self._run, fn)
        except BaseException:
            self._release(None)
            raise
        future.add_done_callback(self._release)  # after the thread returned, or when cancelled unstarted
        return future

    def _run(self, fn: Callable[[], Any]) -> Any:
        start = time.perf_counter()
        with self._lock:
            self.running += 1
            self.peak_running = max(self.peak_running, self.running)
        try:
            return fn()
        finally:
            took = time.perf_counter() - start
            with self._lock:
                self.running -= 1
                self._batch_s = took if not self._batch_s else 0.8 * self._batch_s + 0.2 * took

    def _release(self, _future: Future | None) -> None:
        with self._lock:
            self.admitted -= 1

    def saturated(self) -> Saturated | None:
        """The refusal `submit` would raise now, or None while there is room."""
        with self._lock:
            return self._refusal() if self.admitted >= self.capacity else None

    def _refusal(self) -> Saturated:  # under the lock: about when the first waiting batch will start
        waiting = self.admitted - self.workers + 1
        return Saturated(max(1, math.ceil(waiting * self._batch_s / self.workers)))

    @property
    def queued(self) -> int:
        with self._lock:
            return self.admitted - self.running

    def shutdown(self, wait: bool = False) -> None:
        """Cancel the jobs that have not started; running ones finish (`wait`: join them here)."""
        self._pool.shutdown(wait=wait, cancel_futures=True)


# --- the app -------------------------------------------------------------------------------------
def _jsonable(result: dict[str, Any]) -> dict[str, Any]:
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in result.items()}


class BodyLimit:
    """ASGI middleware: 413 for a body over `limit` bytes, before it is read in full."""

    def __init__(self, app: Any, limit: int, on_reject: Any) -> None:
        self.app, self.limit, self.on_reject = app, limit, on_reject

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            return await self._reject(scope, send)
        seen = 0
        too_big = rejected = False

        async def limited() -> dict:
            nonlocal seen, too_big
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    too_big = True
                    raise _TooBig
            return message

        async def guarded_send(message: dict) -> None:
            # the app may catch _TooBig while parsing the body and answer 400: answer 413 instead
            nonlocal rejected
            if too_big:
                if not rejected:
                    rejected = True
                    await self._reject(scope, send)
                return
            await send(message)

        try:
            await self.app(scope, limited, guarded_send)
        except Exception:
            if not too_big:
                raise
        if too_big and not rejected:
            await self._reject(scope, send)

    async def _reject(self, scope: dict, send: Any) -> None:
        import json

        self.on_reject(scope.get("path", ""))
        body = json.dumps({"error": {"type": "body_too_large",
                                     "message": f"request body over {self.limit} bytes"}}).encode()
        try:
            await send({"type": "http.response.start", "status": 413,
                        "headers": [(b"content-type", b"application/json"),
                                    (b"content-length", str(len(body)).encode()), (b"connection", b"close")]})
            await send({"type": "http.response.body", "body": body})
        except Exception:  # noqa: BLE001 - the client may be gone, or a response already started
            pass


class _TooBig(Exception):
    pass


def _overloaded(pool: ScoringPool, exc: Saturated) -> tuple[dict[str, str], str]:
    return ({"Retry-After": str(exc.retry_after)},
            f"{pool.workers} batches are scoring and the queue is full; retry after {exc.retry_after} s")


class EarlyRefusal:
    """ASGI middleware: when the pool is full, a scoring request gets its 503 before its body is
    parsed (the body is read and dropped, so the connection stays usable); the event loop that
    refuses shares the GIL with the scoring threads, so parsing JSON it will refuse is what makes
    refusals slow at saturation. `submit` still decides for the requests that pass here."""

    def __init__(self, app: Any, pool: ScoringPool, routes: tuple[str, ...], on_reject: Any) -> None:
        self.app, self.pool, self.routes, self.on_reject = app, pool, routes, on_reject

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        full = None
        if scope["type"] == "http" and scope.get("method") == "POST" and scope.get("path") in self.routes:
            full = self.pool.saturated()
        if full is None:
            return await self.app(scope, receive, send)
        import json

        message = {"more_body": True}
        while message.get("more_body") and message.get("type") != "http.disconnect":
            message = await receive()
        self.on_reject(scope["path"])
        headers, text = _overloaded(self.pool, full)
        body = json.dumps({"error": {"type": "overloaded", "message": text}}).encode()
        await send({"type": "http.response.start", "status": 503,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                                *((k.lower().encode(), v.encode()) for k, v in headers.items())]})
        await send({"type": "http.response.body", "body": body})


@dataclass
class _Metrics:
    """The service's Prometheus metrics, in a registry of its own (one app, one registry)."""

    registry: Any
    requests: Any
    scored: Any
    errors: Any
    latency: Any

    @classmethod
    def build(cls, pool: ScoringPool) -> _Metrics:
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        registry = CollectorRegistry()
        Gauge("thesisgym_scoring_in_flight", "batches scoring now (at most --concurrency)",
              registry=registry).set_function(lambda: pool.running)
        Gauge("thesisgym_scoring_queued", "batches waiting for a scoring thread (at most --queue)",
              registry=registry).set_function(lambda: pool.queued)
        return cls(
            registry=registry,
            requests=Counter("thesisgym_requests", "HTTP requests by route and status", ["route", "status"],
                             registry=registry),
            scored=Counter("thesisgym_completions_scored", "completions scored", ["recipe"], registry=registry),
            errors=Counter("thesisgym_reward_errors", "errors recorded while scoring (counted per request)",
                           registry=registry),
            latency=Histogram("thesisgym_request_seconds", "scoring request latency", ["route"],
                              registry=registry, buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)),
        )


def _install_error_handlers(app: Any, metrics: _Metrics) -> Callable[..., Any]:
    """JSON errors `{"error": {"type", "message"}}`, each counted by route and status."""
    from fastapi import Request
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse

    def error(status: int, kind: str, message: str, route: str, headers: dict[str, str] | None = None) -> Any:
        metrics.requests.labels(route, str(status)).inc()
        return JSONResponse({"error": {"type": kind, "message": message}}, status_code=status, headers=headers)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        errs = exc.errors()
        if any(e.get("type") == "json_invalid" for e in errs):
            return error(400, "malformed_json", "request body is not valid JSON", request.url.path)
        if any(e.get("type") == "missing" and tuple(e.get("loc", ())) == ("body",) for e in errs):
            return error(400, "empty_body", "request body is empty; expected a JSON object", request.url.path)
        message = describe_errors(errs, skip=("body",)).replace("'<record>'", "'<body>'")
        return error(422, "invalid_request", message, request.url.path)

    @app.exception_handler(ServiceError)
    async def _service(request: Request, exc: ServiceError) -> JSONResponse:
        return error(exc.status, exc.kind, exc.message, request.url.path, exc.headers)

    return error


def _scoring_runner(config: ServeConfig, pool: ScoringPool, metrics: _Metrics) -> Callable[..., Any]:
    """`run(route, fn, n)`: `fn` on a scoring thread under the limits, its errors as ServiceError."""

    async def run(route: str, fn: Callable[[], Any], n: int) -> Any:
        if n > config.max_batch:
            raise ServiceError(413, "batch_too_large", f"{n} completions; the limit is {config.max_batch}")
        start = time.perf_counter()
        try:
            future = pool.submit(fn)
        except Saturated as exc:
            headers, message = _overloaded(pool, exc)
            raise ServiceError(503, "overloaded", message, headers) from None
        try:
            result = await asyncio.wait_for(asyncio.wrap_future(future), timeout=config.timeout_s)
        except TimeoutError:
            future.cancel()  # never starts if still queued; if running, it keeps its slot until it ends
            raise ServiceError(504, "timeout", f"scoring took longer than {config.timeout_s:g} s") from None
        except ValueError as exc:  # a malformed verifier record or an unknown recipe
            raise ServiceError(422, "invalid_record", str(exc)) from None
        metrics.latency.labels(route).observe(time.perf_counter() - start)
        metrics.requests.labels(route, "200").inc()
        return result

    return run


def _records(items: list[ScoreItem], rows: RowStore, default_split: str) -> list[VerifierRecord]:
    records = []
    for i, item in enumerate(items):
        split = item.split or default_split
        if item.row is not None:
            records.append(item.row)
        elif item.index is not None:
            records.append(rows.record(split, item.index))
        elif item.ticker is not None and item.asof is not None:
            records.append(rows.record(split, rows.index_of(split, item.ticker, item.asof, item.variation)))
        else:
            raise ServiceError(422, "invalid_request", f"field 'items.{i}': needs 'row', 'index' or 'ticker' + 'asof'")
    return records


def _install_scoring_routes(app: Any, config: ServeConfig, rows: RowStore, run: Callable[..., Any],
                            metrics: _Metrics, state: dict[str, Any]) -> None:
    @app.post("/score")
    async def score(body: ScoreRequest) -> dict:
        recipe = body.recipe or config.recipe
        items = body.items

        def work() -> tuple[list[dict[str, Any]], int]:
            with counting_errors() as tally:  # this request's errors only, whatever runs beside it
                records = _records(items, rows, config.split)
                completions = [it.completion if isinstance(it.completion, str)
                               else [m.model_dump() for m in it.completion] for it in items]
                results = score_batch(completions, records, recipe)
            return results, sum(tally.values())

        results, errors = await run("/score", work, len(items))
        metrics.scored.labels(recipe).inc(len(results))
        metrics.errors.inc(errors)
        state["completions"] += len(results)
        return {"recipe": recipe, "n": len(results), "reward_errors": errors,
                "results": [_jsonable(r) for r in results]}

    @app.post("/openrlhf")
    async def openrlhf(body: OpenRLHFRequest, recipe: str | None = None) -> dict:
        from thesisgym.integrations.openrlhf import openrlhf_rewards

        name = recipe or config.recipe
        out = await run("/openrlhf", lambda: openrlhf_rewards(body.query, body.prompts, body.labels, name),
                        len(body.query))
        metrics.scored.labels(name).inc(len(body.query))
        state["completions"] += len(body.query)
        return out


def _install_status_routes(app: Any, config: ServeConfig, metrics: _Metrics, state: dict[str, Any]) -> None:
    from fastapi.responses import JSONResponse, PlainTextResponse
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

    @app.get("/healthz")
    async def healthz() -> dict:
        return {"status": "ok"}

    @app.get("/readyz")
    async def readyz() -> JSONResponse:
        ok = state["ready"]
        return JSONResponse({"ready": ok, "recipe": config.recipe,
                             "dataset": str(config.dataset) if config.dataset else None},
                            status_code=200 if ok else 503)

    @app.get("/metrics")
    async def metrics_route() -> PlainTextResponse:
        return PlainTextResponse(generate_latest(metrics.registry).decode(), media_type=CONTENT_TYPE_LATEST)


def create_app(config: ServeConfig | None = None) -> Any:
    """The FastAPI app (builds the default recipe and opens the dataset first: errors surface at start)."""
    from fastapi import FastAPI

    config = config or ServeConfig()
    load_recipe(config.recipe)
    rows = RowStore(config.dataset, config.split, config.row_cache)
    pool = ScoringPool(config.max_concurrency, config.max_queue)
    metrics = _Metrics.build(pool)
    state = {"ready": True, "completions": 0}

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> Any:
        yield
        # uvicorn runs this after in-flight requests finished (or `graceful_s` ran out)
        state["ready"] = False
        pool.shutdown()
        print(f"thesisgym serve: stopped after scoring {state['completions']} completions", file=sys.stderr,
              flush=True)

    app = FastAPI(title="thesisgym reward service", docs_url=None, redoc_url=None, lifespan=lifespan)
    _install_error_handlers(app, metrics)
    app.add_middleware(EarlyRefusal, pool=pool, routes=("/score", "/openrlhf"),
                       on_reject=lambda route: metrics.requests.labels(route, "503").inc())
    app.add_middleware(BodyLimit, limit=config.max_body_bytes,
                       on_reject=lambda route: metrics.requests.labels(route, "413").inc())
    _install_status_routes(app, config, metrics, state)
    _install_scoring_routes(app, config, rows, _scoring_runner(config, pool, metrics), metrics, state)
    app.state.config = config
    app.state.rows = rows
    app.state.pool = pool
    return app
