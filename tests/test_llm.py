"""thesisgym.llm against a real HTTP server speaking the OpenAI chat-completions protocol.

The server (aiohttp, 127.0.0.1, random free port, background thread) answers from a script:
("ok", text) | ("status", code) | ("hang", seconds) | ("gate", n) | ("echo",); it counts every hit,
so cache and retry behaviour is asserted on what really crossed the wire. "gate" holds each request
until n are in flight at once (then answers "too late") and records the most in flight, so
concurrency is asserted by counting, not by timing. test_consistency.py and
test_openai_teacher.py import `FakeOpenAI` / `fake_openai` from here.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import threading
import time
from collections import deque

import pytest
from pydantic import BaseModel

os.environ.setdefault("HF_HUB_OFFLINE", "1")
aiohttp_web = pytest.importorskip("aiohttp.web")

from thesisgym.llm import LLMClient, LLMError, extract_json, run_sync  # noqa: E402


class FakeOpenAI:
    """Scripted OpenAI-compatible server; `default` answers when the script is empty."""

    def __init__(self) -> None:
        self.script: deque = deque()
        self.default: tuple = ("ok", "hello")
        self.hits = 0
        self.requests: list[dict] = []
        self.responder = None  # optional fn(request_json) -> action, overrides script/default
        self.inflight = self.max_inflight = 0
        self._gate: asyncio.Event | None = None
        self._lock = threading.Lock()
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        sock.close()
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("fake OpenAI server did not start")

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        app = aiohttp_web.Application()
        app.router.add_post("/v1/chat/completions", self._handle)
        self._runner = aiohttp_web.AppRunner(app)
        self._loop.run_until_complete(self._runner.setup())
        site = aiohttp_web.TCPSite(self._runner, "127.0.0.1", self.port)
        self._loop.run_until_complete(site.start())
        self._ready.set()
        self._loop.run_forever()

    async def _handle(self, request):
        body = await request.json()
        with self._lock:
            self.hits += 1
            self.requests.append(body)
            if self.responder is not None:
                action = self.responder(body)
            else:
                action = self.script.popleft() if self.script else self.default
        kind = action[0]
        if kind == "hang":
            await asyncio.sleep(action[1])
            action = ("ok", "too late")
            kind = "ok"
        if kind == "gate":
            await self._through_gate(action[1])
            action, kind = ("ok", "too late"), "ok"
        if kind == "status":
            headers = {"retry-after": "0"} if action[1] == 429 else {}
            return aiohttp_web.json_response({"error": {"message": f"scripted {action[1]}"}},
                                             status=action[1], headers=headers)
        text = action[1] if kind == "ok" else body["messages"][-1]["content"]
        n = int(body.get("n") or 1)
        return aiohttp_web.json_response({
            "id": f"cmpl-{self.hits}", "object": "chat.completion", "created": int(time.time()),
            "model": body.get("model", "fake"),
            "choices": [{"index": i, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
                        for i in range(n)],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        })

    async def _through_gate(self, n: int) -> None:
        if self._gate is None:
            self._gate = asyncio.Event()
        self.inflight += 1  # the handlers run on the server's one event loop: no lock needed
        self.max_inflight = max(self.max_inflight, self.inflight)
        if self.inflight >= n:
            self._gate.set()
        try:
            # a hang guard, not a timing assertion: a client that never sends n at once fails on the count
            await asyncio.wait_for(self._gate.wait(), 30)
        except asyncio.TimeoutError:  # noqa: UP041 (builtin TimeoutError only from 3.11)
            pass
        finally:
            self.inflight -= 1

    def reset(self) -> None:
        with self._lock:
            self.script.clear()
            self.hits = 0
            self.inflight = self.max_inflight = 0
            self._gate = None
            self.requests.clear()
            self.default = ("ok", "hello")
            self.responder = None

    def close(self) -> None:
        async def stop():
            await self._runner.cleanup()
        asyncio.run_coroutine_threadsafe(stop(), self._loop).result(5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)


@pytest.fixture(scope="module")
def fake_openai():
    server = FakeOpenAI()
    yield server
    server.close()


@pytest.fixture
def server(fake_openai):
    fake_openai.reset()
    return fake_openai


def make_client(server: FakeOpenAI, tmp_path, **kw) -> LLMClient:
    opts = dict(model="fake-model", base_url=server.base_url, timeout=0.5, max_retries=3, backoff_base=0.01,
                backoff_max=0.05, cache_path=str(tmp_path / "cache.sqlite"))
    opts.update(kw)
    return LLMClient(**opts)


MSG = [{"role": "user", "content": "ping"}]


class Answer(BaseModel):
    value: int


def test_chat_returns_text_counts_usage_and_cost(server, tmp_path):
    server.default = ("ok", "pong")
    llm = make_client(server, tmp_path, price_prompt_per_1k=1.0, price_completion_per_1k=2.0)
    assert llm.chat(MSG) == ["pong"]
    assert server.hits == 1
    assert llm.usage.prompt_tokens == 10 and llm.usage.completion_tokens == 5
    assert llm.usage.cost == pytest.approx(10 / 1000 * 1.0 + 5 / 1000 * 2.0)
    assert server.requests[0]["model"] == "fake-model"


def test_cache_prevents_second_call_and_survives_a_new_client(server, tmp_path):
    server.default = ("ok", "cached answer")
    llm = make_client(server, tmp_path)
    assert llm.chat(MSG, temperature=0.0) == ["cached answer"]
    assert llm.chat(MSG, temperature=0.0) == ["cached answer"]
    assert server.hits == 1 and llm.usage.cache_hits == 1
    again = make_client(server, tmp_path)  # a rerun: new process state, same cache file
    assert again.chat(MSG, temperature=0.0) == ["cached answer"]
    assert server.hits == 1
    # different params are a different key
    assert llm.chat(MSG, temperature=0.7) == ["cached answer"]
    assert server.hits == 2


def test_retries_429_then_succeeds(server, tmp_path):
    server.script.extend([("status", 429), ("status", 429), ("ok", "finally")])
    llm = make_client(server, tmp_path, cache_path=None)
    assert llm.chat(MSG) == ["finally"]
    assert server.hits == 3 and llm.usage.retries == 2


def test_retries_500s_then_gives_up_with_llmerror(server, tmp_path):
    server.default = ("status", 500)
    llm = make_client(server, tmp_path, cache_path=None, max_retries=2)
    with pytest.raises(LLMError, match="InternalServerError"):
        llm.chat(MSG)
    assert server.hits == 3 and llm.usage.failures == 1


def test_400_is_not_retried(server, tmp_path):
    server.default = ("status", 400)
    llm = make_client(server, tmp_path, cache_path=None)
    with pytest.raises(LLMError):
        llm.chat(MSG)
    assert server.hits == 1


def test_hang_past_timeout_is_retried(server, tmp_path):
    # the first answer would come after 2 s; the second only exists if the client gave up on the first
    server.script.extend([("hang", 2.0), ("ok", "after the hang")])
    llm = make_client(server, tmp_path, cache_path=None, timeout=0.3)
    assert llm.chat(MSG) == ["after the hang"]
    assert llm.usage.retries == 1 and server.hits == 2


def test_json_malformed_is_retried_then_validated(server, tmp_path):
    server.script.extend([("ok", "not json at all"), ("ok", 'Sure! ```json\n{"value": 7}\n```')])
    llm = make_client(server, tmp_path)
    assert run_sync(lambda: llm.ajson(MSG, Answer)) == Answer(value=7)
    assert server.hits == 2 and llm.usage.json_fallbacks == 0
    # a rerun replays both answers from the cache: no new request
    again = make_client(server, tmp_path)
    assert run_sync(lambda: again.ajson(MSG, Answer)) == Answer(value=7)
    assert server.hits == 2


def test_json_fallback_is_counted_and_never_raises(server, tmp_path, caplog):
    server.default = ("ok", '{"value": "not an int"}')
    llm = make_client(server, tmp_path, cache_path=None)
    fb = Answer(value=-1)
    assert run_sync(lambda: llm.ajson(MSG, Answer, fallback=fb)) == fb
    assert llm.usage.json_fallbacks == 1 and server.hits == 2
    assert "fallback" in caplog.text
    server.default = ("status", 503)
    llm2 = make_client(server, tmp_path, cache_path=None, max_retries=1)
    assert llm2.json_batch([MSG, MSG], Answer) == [None, None]
    assert llm2.usage.json_fallbacks == 2


def test_batch_is_concurrent_and_bounded(server, tmp_path):
    server.default = ("gate", 4)  # each request waits until 4 are in flight
    llm = make_client(server, tmp_path, cache_path=None, timeout=60.0, concurrency=4)
    batch = [[{"role": "user", "content": f"q{i}"}] for i in range(8)]
    out = llm.chat_batch(batch)
    assert out == [["too late"]] * 8 and server.hits == 8
    assert server.max_inflight == 4  # 4 at a time: concurrent, and never more than the bound


def test_sync_wrapper_works_inside_a_running_loop(server, tmp_path):
    server.default = ("ok", "from a thread")
    llm = make_client(server, tmp_path, cache_path=None)

    async def inside():
        return llm.chat(MSG)  # sync call from async code: must not deadlock or raise

    assert asyncio.run(inside()) == ["from a thread"]


def test_extract_json_and_config_validation(tmp_path):
    assert extract_json('prefix {"a": 1} suffix') == {"a": 1}
    with pytest.raises(ValueError):
        extract_json("nothing here")
    with pytest.raises(TypeError):
        LLMClient(base_url="http://x")
    with pytest.raises(ValueError):
        LLMClient(model="m", concurrency=0, cache_path=None)


def test_cache_file_is_wal_sqlite(server, tmp_path):
    llm = make_client(server, tmp_path)
    llm.chat(MSG)
    assert len(llm.cache) == 1
    import sqlite3

    mode = sqlite3.connect(tmp_path / "cache.sqlite").execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"
    assert json.loads(json.dumps(llm.usage.as_dict()))["requests"] == 1


def test_identical_concurrent_requests_share_one_call(server, tmp_path):
    server.default = ("gate", 2)  # held until both distinct prompts are in flight
    llm = make_client(server, tmp_path, timeout=60.0)
    out = llm.chat_batch([MSG] * 5 + [[{"role": "user", "content": "other"}]])
    assert out == [["too late"]] * 6 and server.hits == 2 and server.max_inflight == 2
