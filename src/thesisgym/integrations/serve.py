"""`thesisgym serve`: the verifier as an HTTP reward service (FastAPI on uvicorn, loopback by default).

Why a service: a trainer on another machine (or in another Python) calls one URL instead of
importing thesisgym; OpenRLHF's remote reward model is exactly such a URL. Every route scores with
`thesisgym.integrations.core.score_batch`, the code path TRL, verl, verifiers and OpenRLHF use.

Routes
- `POST /score` `{"recipe"?: str, "items": [{"completion": str | [{role, content}], "row": {...}}
  | {"completion", "split"?, "index"} | {"completion", "split"?, "ticker", "asof", "variation"?}]}`
  -> `{"recipe", "n", "results": [{"score", "reward/<name>", components...}]}`; not-applicable
  values are `null`. A `row` carries the verifier record inline (evidence, sections, label,
  fwd_return, fwd_vol; unknown keys are refused); `index`/`ticker`+`asof` name a row of the
  dataset given with `--dataset` (rows are converted once and cached by key).
- `POST /openrlhf` OpenRLHF's remote-RM payload `{"query", "prompts", "labels"}` ->
  `{"rewards", "scores", "extra_logs"}` (labels = the JSON verifier records of `thesisgym export`).
- `GET /healthz` (alive), `GET /readyz` (recipe built, dataset loaded), `GET /metrics` (Prometheus).

Limits: request bodies over `max_body_bytes` get 413 before they are read in full; batches over
`max_batch` get 413; scoring longer than `timeout_s` gets 504 (the worker thread finishes in the
background, and at most `max_concurrency` batches score at once). Errors are JSON
`{"error": {"type", "message"}}` with a 4xx/5xx status; malformed JSON is 400, a schema error 422.
uvicorn stops gracefully on SIGTERM/SIGINT: it stops accepting, lets in-flight requests finish
(up to `--graceful` seconds), prints "thesisgym serve: stopped after scoring N completions" and
then exits by the same signal (uvicorn re-raises it); a response is only ever sent whole.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import sys
import threading
import time
from collections import OrderedDict
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
from thesisgym.schema import StrictModel

__all__ = ["ServeConfig", "create_app"]


@dataclass
class ServeConfig:
    dataset: Path | None = None
    split: str = "train"
    recipe: str = field(default_factory=default_recipe)
    max_body_bytes: int = 8 * 1024 * 1024
    max_batch: int = 256
    timeout_s: float = 30.0
    max_concurrency: int = 4
    row_cache: int = 4096

    def __post_init__(self) -> None:
        for name in ("max_body_bytes", "max_batch", "max_concurrency", "row_cache"):
            if int(getattr(self, name)) <= 0:
                raise ValueError(f"{name}: must be a positive integer, got {getattr(self, name)!r}")
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
    def __init__(self, status: int, kind: str, message: str) -> None:
        super().__init__(message)
        self.status, self.kind, self.message = status, kind, message


# --- dataset rows, cached by key ---------------------------------------------------------------
class RowStore:
    """Rows of a built dataset as VerifierRecords, converted on first use (bounded LRU by key)."""

    def __init__(self, path: Path | None, default_split: str, cache_size: int) -> None:
        self.path, self.default_split, self.cache_size = path, default_split, cache_size
        self._splits: dict[str, Any] = {}
        self._keys: dict[str, dict[tuple, int]] = {}
        self._cache: OrderedDict[tuple[str, int], VerifierRecord] = OrderedDict()
        self._lock = threading.Lock()
        if path is not None:
            from thesisgym.dataset.splits import load_split

            loaded = load_split(path, default_split)  # ValueError names the directory / split
            self._splits[default_split] = loaded
        self.hits = self.misses = 0

    def _split(self, split: str) -> Any:
        if self.path is None:
            raise ServiceError(422, "no_dataset", "items refer to dataset rows but the service was "
                               "started without --dataset; send the verifier record as 'row'")
        if split not in self._splits:
            from thesisgym.dataset.splits import load_split

            try:
                self._splits[split] = load_split(self.path, split)
            except ValueError as exc:
                raise ServiceError(422, "unknown_split", str(exc)) from None
        return self._splits[split]

    def index_of(self, split: str, ticker: str, asof: str, variation: int) -> int:
        ds = self._split(split)
        if split not in self._keys:
            cols = ds.column_names
            variations = ds["variation"] if "variation" in cols else [0] * len(ds)
            self._keys[split] = {k: i for i, k in reversed(list(enumerate(zip(
                ds["ticker"], ds["asof"], variations, strict=True))))}
        key = (ticker, asof, variation)
        if key not in self._keys[split]:
            raise ServiceError(422, "unknown_row", f"split {split!r} has no row ticker={ticker!r} "
                               f"asof={asof!r} variation={variation}")
        return self._keys[split][key]

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


def create_app(config: ServeConfig | None = None) -> Any:
    """The FastAPI app (builds the default recipe and opens the dataset first: errors surface at start)."""
    from fastapi import FastAPI, Request
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse, PlainTextResponse
    from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest

    config = config or ServeConfig()
    load_recipe(config.recipe)
    rows = RowStore(config.dataset, config.split, config.row_cache)
    registry = CollectorRegistry()
    requests = Counter("thesisgym_requests", "HTTP requests by route and status", ["route", "status"],
                       registry=registry)
    scored = Counter("thesisgym_completions_scored", "completions scored", ["recipe"], registry=registry)
    latency = Histogram("thesisgym_request_seconds", "scoring request latency", ["route"], registry=registry,
                        buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30))
    slots = asyncio.Semaphore(config.max_concurrency)
    state = {"ready": True, "completions": 0}

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> Any:
        yield
        # uvicorn runs this after in-flight requests finished (or `graceful_s` ran out)
        state["ready"] = False
        print(f"thesisgym serve: stopped after scoring {state['completions']} completions", file=sys.stderr,
              flush=True)

    app = FastAPI(title="thesisgym reward service", docs_url=None, redoc_url=None, lifespan=lifespan)

    def error(status: int, kind: str, message: str, route: str) -> JSONResponse:
        requests.labels(route, str(status)).inc()
        return JSONResponse({"error": {"type": kind, "message": message}}, status_code=status)

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
        return error(exc.status, exc.kind, exc.message, request.url.path)

    app.add_middleware(BodyLimit, limit=config.max_body_bytes,
                       on_reject=lambda route: requests.labels(route, "413").inc())

    async def run_scoring(route: str, fn: Any, n: int) -> Any:
        if n > config.max_batch:
            raise ServiceError(413, "batch_too_large", f"{n} completions; the limit is {config.max_batch}")
        start = time.perf_counter()

        async def guarded() -> Any:
            async with slots:
                return await asyncio.to_thread(fn)

        try:
            result = await asyncio.wait_for(guarded(), timeout=config.timeout_s)
        except asyncio.TimeoutError:
            raise ServiceError(504, "timeout", f"scoring took longer than {config.timeout_s:g} s") from None
        except ValueError as exc:  # a malformed verifier record or an unknown recipe
            raise ServiceError(422, "invalid_record", str(exc)) from None
        latency.labels(route).observe(time.perf_counter() - start)
        requests.labels(route, "200").inc()
        return result

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
    async def metrics() -> PlainTextResponse:
        return PlainTextResponse(generate_latest(registry).decode(), media_type=CONTENT_TYPE_LATEST)

    @app.post("/score")
    async def score(body: ScoreRequest) -> dict:
        recipe = body.recipe or config.recipe
        items = body.items

        def work() -> list[dict[str, Any]]:
            records = []
            for i, item in enumerate(items):
                if item.row is not None:
                    records.append(item.row)
                    continue
                split = item.split or config.split
                if item.index is not None:
                    records.append(rows.record(split, item.index))
                elif item.ticker is not None and item.asof is not None:
                    records.append(rows.record(split, rows.index_of(split, item.ticker, item.asof,
                                                                    item.variation)))
                else:
                    raise ServiceError(422, "invalid_request", f"field 'items.{i}': needs 'row', 'index' "
                                       "or 'ticker' + 'asof'")
            completions = [it.completion if isinstance(it.completion, str)
                           else [m.model_dump() for m in it.completion] for it in items]
            return score_batch(completions, records, recipe)

        results = await run_scoring("/score", work, len(items))
        scored.labels(recipe).inc(len(results))
        state["completions"] += len(results)
        return {"recipe": recipe, "n": len(results), "results": [_jsonable(r) for r in results]}

    @app.post("/openrlhf")
    async def openrlhf(body: OpenRLHFRequest, recipe: str | None = None) -> dict:
        from thesisgym.integrations.openrlhf import openrlhf_rewards

        name = recipe or config.recipe
        out = await run_scoring("/openrlhf", lambda: openrlhf_rewards(body.query, body.prompts, body.labels, name),
                                len(body.query))
        scored.labels(name).inc(len(body.query))
        state["completions"] += len(body.query)
        return out

    app.state.config = config
    app.state.rows = rows
    return app

