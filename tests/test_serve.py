"""`thesisgym serve` on loopback: bad requests get a clear 4xx and the service keeps answering.

In-process tests use FastAPI's TestClient; the disconnect, oversized-body and shutdown tests run
the real `thesisgym serve` (uvicorn) in a subprocess on 127.0.0.1 and talk to it over sockets.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from test_rewards_fixtures import gold_thesis, make_row
from thesisgym.integrations import core
from thesisgym.integrations.core import ground_truth_json, score_one
from thesisgym.integrations.serve import Saturated, ScoringPool, ServeConfig, create_app

ROOT = Path(__file__).resolve().parents[1]
RECORD = json.loads(ground_truth_json(make_row()))


@pytest.fixture(scope="module")
def dataset_dir(tmp_path_factory):
    import datasets

    rows = [make_row(), make_row(label="SELL", asof="2024-03-11", fwd_return=-0.03)]
    for r in rows:
        r["variation"] = 0
    path = tmp_path_factory.mktemp("serve") / "ctx"
    split = datasets.Dataset.from_list(rows)
    datasets.DatasetDict({"train": split, "test": split}).save_to_disk(str(path))
    return path


@pytest.fixture(scope="module")
def client(dataset_dir):
    app = create_app(ServeConfig(dataset=dataset_dir, recipe="dsr", max_batch=8, max_body_bytes=1_000_000))
    with TestClient(app) as c:
        yield c


def _item(**kw):
    return {"completion": gold_thesis(), **kw}


def test_scores_inline_rows_and_dataset_rows_alike(client):
    expected = score_one(gold_thesis(), make_row(), "dsr")["score"]
    body = {"items": [_item(row=RECORD), _item(index=0), _item(ticker="AAPL", asof="2024-03-08"),
                      _item(index=1, split="test")]}
    r = client.post("/score", json=body)
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["recipe"] == "dsr" and out["n"] == 4
    assert [x["score"] for x in out["results"][:3]] == pytest.approx([expected] * 3)
    assert out["results"][3]["score"] != pytest.approx(expected)  # row 1 is labelled SELL
    assert out["results"][0]["structure"] == 1.0
    # per-request recipe; rows are cached by key after the first use
    r = client.post("/score", json={"recipe": "trading_r1", "items": [_item(index=0)]})
    assert r.json()["results"][0]["score"] == pytest.approx(1.7)
    assert client.app.state.rows.hits >= 1


@pytest.mark.parametrize(
    ("body", "status", "kind", "message"),
    [
        (b"{not json", 400, "malformed_json", "not valid JSON"),
        (b"", 400, "empty_body", "request body is empty"),
        (json.dumps({"itemz": []}).encode(), 422, "invalid_request", "field 'items': Field required"),
        (json.dumps({"items": []}).encode(), 422, "invalid_request", "field 'items'"),
        (json.dumps({"items": [{"completion": 7, "row": RECORD}]}).encode(), 422, "invalid_request",
         "field 'items.0.completion"),
        (json.dumps({"items": [{"completion": "x", "row": {**RECORD, "fwd_return": "high"}}]}).encode(), 422,
         "invalid_request", "field 'items.0.row.fwd_return'"),
        (json.dumps({"items": [{"completion": "x", "row": {**RECORD, "secret": 1}}]}).encode(), 422,
         "invalid_request", "field 'items.0.row.secret': unknown field"),
        (json.dumps({"items": [{"completion": "x", "row": RECORD, "colour": "red"}]}).encode(), 422,
         "invalid_request", "field 'items.0.colour': unknown field"),
        (json.dumps({"items": [{"completion": "x"}]}).encode(), 422, "invalid_request", "needs 'row', 'index'"),
        (json.dumps({"items": [{"completion": "x", "index": 99}]}).encode(), 422, "unknown_row", "index 99"),
        (json.dumps({"items": [{"completion": "x", "index": 0, "split": "val"}]}).encode(), 422,
         "unknown_split", "no split 'val'"),
        (json.dumps({"items": [{"completion": "x", "ticker": "MSFT", "asof": "2024-03-08"}]}).encode(), 422,
         "unknown_row", "ticker='MSFT'"),
        (json.dumps({"recipe": "nope", "items": [{"completion": "x", "row": RECORD}]}).encode(), 422,
         "invalid_record", "neither a file nor a shipped recipe"),
        (json.dumps({"items": [_item(row=RECORD)] * 9}).encode(), 413, "batch_too_large", "limit is 8"),
    ],
)
def test_bad_requests_get_a_structured_4xx(client, body, status, kind, message):
    r = client.post("/score", content=body, headers={"content-type": "application/json"})
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert err["type"] == kind and message in err["message"]
    assert client.post("/score", json={"items": [_item(row=RECORD)]}).status_code == 200


def test_oversized_body_is_refused_before_it_is_read(client):
    big = b'{"items": [{"completion": "' + b"x" * (20 * 1024 * 1024) + b'"}]}'
    r = client.post("/score", content=big, headers={"content-type": "application/json"})
    assert r.status_code == 413 and r.json()["error"]["type"] == "body_too_large"

    def chunks():  # no content-length: the middleware counts the streamed bytes
        for _ in range(21):
            yield b"x" * (1024 * 1024)

    r = client.post("/score", content=chunks(), headers={"content-type": "application/json"})
    assert r.status_code == 413
    assert client.get("/healthz").json() == {"status": "ok"}


def test_health_ready_and_metrics(client):
    assert client.get("/readyz").json()["ready"] is True
    client.post("/score", json={"items": [_item(row=RECORD)]})
    text = client.get("/metrics").text
    assert 'thesisgym_completions_scored_total{recipe="dsr"}' in text
    assert 'thesisgym_requests_total{route="/score",status="422"}' in text
    assert "thesisgym_request_seconds_bucket" in text


def test_openrlhf_route_rejects_bad_labels(client):
    r = client.post("/openrlhf", json={"query": ["x"], "labels": ["not a record"]})
    assert r.status_code == 422 and "labels[0]" in r.json()["error"]["message"]
    r = client.post("/openrlhf", json={"query": ["x"], "labels": [1]})
    assert r.status_code == 422


def test_slow_scoring_times_out_with_504(monkeypatch):
    import thesisgym.integrations.serve as serve

    release = threading.Event()

    def stuck(*args, **kwargs):  # scoring that never finishes on its own: no sleep, no race
        release.wait(60)
        return []

    monkeypatch.setattr(serve, "score_batch", stuck)
    try:
        with TestClient(create_app(ServeConfig(recipe="dsr", timeout_s=0.05))) as c:
            r = c.post("/score", json={"items": [_item(row=RECORD)]})
            assert r.status_code == 504 and r.json()["error"]["type"] == "timeout"
            assert c.get("/healthz").status_code == 200
    finally:
        release.set()


def test_the_pool_frees_a_slot_only_when_its_thread_ends():
    gate, started = threading.Event(), threading.Event()
    pool = ScoringPool(workers=1, queue=1)

    def held():
        started.set()
        assert gate.wait(30)
        return "first"

    first = pool.submit(held)
    assert started.wait(30)
    second = pool.submit(lambda: "second")
    with pytest.raises(Saturated) as exc:
        pool.submit(lambda: "third")
    assert exc.value.retry_after >= 1
    # the first request gives up (as a timed-out one does): its thread keeps the only slot
    assert not first.cancel() and pool.running == 1 and pool.queued == 1
    assert second.cancel()  # still waiting: it never runs, and its queue place is free again
    third = pool.submit(lambda: "third")
    with pytest.raises(Saturated):
        pool.submit(lambda: "fourth")
    gate.set()
    assert first.result(30) == "first" and third.result(30) == "third"
    pool.shutdown(wait=True)
    assert pool.peak_running == 1 and pool.admitted == 0 and second.cancelled()


def _gated_scorer(monkeypatch):
    import thesisgym.integrations.serve as serve

    gate, started = threading.Event(), threading.Event()

    def scorer(completions, records, recipe):
        started.set()
        assert gate.wait(30)
        return [{"score": 1.0} for _ in completions]

    monkeypatch.setattr(serve, "score_batch", scorer)
    return gate, started


def test_a_full_service_answers_503_with_retry_after(monkeypatch):
    gate, started = _gated_scorer(monkeypatch)
    with TestClient(create_app(ServeConfig(recipe="dsr", max_concurrency=1, max_queue=0))) as c:
        answers = []
        t = threading.Thread(target=lambda: answers.append(c.post("/score", json={"items": [_item(row=RECORD)]})))
        t.start()
        try:
            assert started.wait(30)
            r = c.post("/score", json={"items": [_item(row=RECORD)]})
            assert r.status_code == 503 and r.json()["error"]["type"] == "overloaded"
            assert int(r.headers["retry-after"]) >= 1
            # refused before its body is parsed: even malformed JSON gets the 503, not a 400
            r = c.post("/score", content=b"{not json", headers={"content-type": "application/json"})
            assert r.status_code == 503
            assert c.get("/healthz").status_code == 200  # the rest of the service still answers
        finally:
            gate.set()
            t.join(30)
        assert answers[0].status_code == 200
        assert 'thesisgym_requests_total{route="/score",status="503"} 2.0' in c.get("/metrics").text


def test_each_request_reports_its_own_reward_errors(monkeypatch):
    """Request A records an error while request B is scoring beside it: A reports 1, B 0."""
    import thesisgym.integrations.serve as serve

    a_failed = threading.Event()

    def fragile(prompts, completions, **kw):
        raise RuntimeError("fragile reward")

    def signal_(prompts, completions, **kw):
        a_failed.set()
        return [0.0] * len(completions)

    def waits(prompts, completions, **kw):
        assert a_failed.wait(30)
        return [1.0] * len(completions)

    recipes = {"A": core.Recipe("A", (fragile, signal_), (1.0, 1.0)), "B": core.Recipe("B", (waits,), (1.0,))}
    monkeypatch.setattr(serve, "load_recipe", lambda name: None)
    monkeypatch.setattr(serve, "score_batch", lambda c, r, name: core.score_batch(c, r, recipes[name]))
    with TestClient(create_app(ServeConfig(recipe="B", max_concurrency=2))) as c:
        out = {}
        b = threading.Thread(target=lambda: out.update(B=c.post("/score", json={"items": [_item(row=RECORD)]})))
        b.start()
        out["A"] = c.post("/score", json={"recipe": "A", "items": [_item(row=RECORD)]})
        b.join(60)
    a, b_ = out["A"].json(), out["B"].json()
    assert a["reward_errors"] == 1 and a["results"][0]["score"] is None and a["results"][0]["reward_errors"] == 1
    assert b_["reward_errors"] == 0 and b_["results"][0]["score"] == 1.0


def test_config_and_cli_errors(tmp_path):
    with pytest.raises(ValueError, match="max_batch"):
        ServeConfig(max_batch=0)
    from typer.testing import CliRunner

    from thesisgym.cli import app

    result = CliRunner().invoke(app, ["serve", "--dataset", str(tmp_path / "none"), "--port", "1"])
    assert result.exit_code == 2 and "no such dataset directory" in result.output


# --- the real server on loopback ---------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _launch(dataset_dir, *args: str, prelude: str = "", env: dict | None = None):
    """`thesisgym serve` in a subprocess on 127.0.0.1 (`prelude`: Python run before the CLI, e.g. a
    scorer hook), once /readyz answers."""
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""),
           **(env or {})}
    proc = subprocess.Popen(
        [sys.executable, "-c", prelude + "from thesisgym.cli import main; main()", "serve", "--dataset",
         str(dataset_dir), "--port", str(port), *args],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            if httpx.get(url + "/readyz", timeout=1).status_code == 200:
                break
        except httpx.TransportError:
            time.sleep(0.2)
        if proc.poll() is not None:
            pytest.fail(f"server exited: {proc.stderr.read().decode()[-2000:]}")
    else:
        proc.kill()
        pytest.fail("server did not become ready in 60 s")
    return proc, port, url


@pytest.fixture
def server(dataset_dir):
    proc, port, url = _launch(dataset_dir, "--max-body-mb", "1", "--graceful", "20")
    yield proc, port, url
    if proc.poll() is None:
        proc.kill()
        proc.wait(10)


def test_client_disconnect_mid_request_leaves_the_service_answering(server):
    proc, port, url = server
    for _ in range(3):
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(b"POST /score HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      b"Content-Length: 100000\r\n\r\n{\"items\": [{\"completion\": \"abc")
        # closed with 99% of the body unsent
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:  # a 20 MB declared body
        s.sendall(b"POST /score HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: 20971520\r\n\r\n")
        assert b" 413 " in s.recv(4096).split(b"\r\n")[0] + b" "
    r = httpx.post(url + "/score", json={"items": [_item(index=0)]}, timeout=30)
    assert r.status_code == 200 and r.json()["n"] == 1
    assert proc.poll() is None


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_a_kill_under_load_never_yields_a_partial_response(server, sig):
    proc, port, url = server
    body = {"items": [_item(index=i % 2) for i in range(32)]}
    outcomes: list[str] = []
    flowing = threading.Event()

    def worker() -> None:
        with httpx.Client(timeout=60) as c:
            for _ in range(50):
                try:
                    r = c.post(url + "/score", json=body)
                except httpx.TransportError:
                    # refused after shutdown began, or (SIGKILL) cut mid-response: httpx raises on a
                    # body shorter than its content-length, so a cut response never parses as a result
                    outcomes.append("refused")
                    return
                data = r.json()  # a truncated body would fail to parse here
                assert r.status_code == 200 and data["n"] == 32 and len(data["results"]) == 32
                outcomes.append("ok")
                if outcomes.count("ok") >= 4:
                    flowing.set()

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    flowing.wait(60)  # kill once the load is flowing (4 answers in); a hang guard, not a timing assertion
    proc.send_signal(sig)
    for t in threads:
        t.join(90)
    code = proc.wait(60)
    assert outcomes.count("ok") >= 1
    assert set(outcomes) <= {"ok", "refused"}
    if sig == signal.SIGTERM:
        # graceful: in-flight requests finished, then the lifespan end ran; uvicorn re-raises the
        # captured SIGTERM, hence -SIGTERM rather than 0
        assert code in (0, -signal.SIGTERM)
        assert "thesisgym serve: stopped after scoring" in proc.stderr.read().decode()
    else:
        assert code == -signal.SIGKILL


# --- load and faults on loopback: 64 clients, timeouts, disconnects, SIGTERM mid-batch ---------------
# Run before the CLI in the server process: scoring becomes a stand-in that works for the time its
# completion names ("<request id>:<seconds>") and logs each start (with how many batches are scoring
# at that moment, counted by the scorer itself) and each end, line-buffered so a SIGTERM loses nothing.
SCORER_HOOK = """
import os, threading, time
import thesisgym.integrations.serve as _serve
_lock, _now = threading.Lock(), [0]
_log = open(os.environ["THESISGYM_TEST_SCORE_LOG"], "a", buffering=1)
def _scorer(completions, records, recipe):
    with _lock:
        _now[0] += 1
        _log.write("start %d %s\\n" % (_now[0], " ".join(completions)))
    try:
        time.sleep(sum(float(c.split(":")[1]) for c in completions))
        return [{"score": 1.0} for _ in completions]
    finally:
        with _lock:
            _now[0] -= 1
            _log.write("end %s\\n" % " ".join(completions))
_serve.score_batch = _scorer
"""
LIMIT, CLIENTS = 4, 64


def _fault_plan(client: int) -> list[tuple[str, float]]:
    """Per client: (kind, seconds of work) for each of its requests. A slow batch (1.5 s) always
    outlives the 0.5 s timeout, so its answer can only be a 504 (or a 503 at the door)."""
    if client % 16 == 5:
        return [("disconnect", 0.2), ("normal", 0.01)]
    if client % 8 == 3:
        return [("slow", 1.5), ("normal", 0.01)]
    return [("normal", 0.01)] * 3


async def _fault_clients(url: str, port: int, outcomes: dict, trigger: asyncio.Event) -> None:
    async def post(c: httpx.AsyncClient, rid: str, seconds: float) -> None:
        body = {"items": [{"completion": f"{rid}:{seconds}", "index": 0}]}
        try:
            r = await c.post(url + "/score", json=body)
        except httpx.TransportError as exc:
            outcomes[rid] = ("transport", type(exc).__name__)
            return
        data = r.json()  # a cut body would fail to parse here
        if r.status_code == 200:
            assert data["n"] == 1 and data["results"][0]["score"] == 1.0 and data["reward_errors"] == 0
        else:
            assert set(data) == {"error"} and data["error"]["message"]
            if r.status_code == 503:
                assert int(r.headers["retry-after"]) >= 1
        outcomes[rid] = (r.status_code, data.get("error", {}).get("type"))
        if len(outcomes) >= 40:
            trigger.set()

    async def disconnect(rid: str, seconds: float) -> None:  # sends a whole request, leaves unanswered
        body = json.dumps({"items": [{"completion": f"{rid}:{seconds}", "index": 0}]}).encode()
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"POST /score HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        await writer.drain()
        writer.close()
        outcomes[rid] = ("gone", None)

    async def client(c: httpx.AsyncClient, k: int) -> None:
        for j, (kind, seconds) in enumerate(_fault_plan(k)):
            rid = f"c{k}r{j}"
            await (disconnect(rid, seconds) if kind == "disconnect" else post(c, rid, seconds))

    limits = httpx.Limits(max_connections=CLIENTS, max_keepalive_connections=CLIENTS)
    async with httpx.AsyncClient(timeout=60, limits=limits) as c:  # one connection per client
        await asyncio.gather(*(client(c, k) for k in range(CLIENTS)))


def test_load_timeouts_disconnects_and_sigterm_keep_the_limit_and_answer_once(dataset_dir, tmp_path):
    log = tmp_path / "scored.log"
    proc, port, url = _launch(dataset_dir, "--concurrency", str(LIMIT), "--queue", "12", "--timeout", "0.5",
                              "--graceful", "20", prelude=SCORER_HOOK,
                              env={"THESISGYM_TEST_SCORE_LOG": str(log)})
    outcomes: dict[str, tuple] = {}
    try:
        async def main() -> None:
            trigger = asyncio.Event()
            load = asyncio.create_task(_fault_clients(url, port, outcomes, trigger))
            await asyncio.wait([load, asyncio.create_task(trigger.wait())], return_when=asyncio.FIRST_COMPLETED)
            # SIGTERM while batches are scoring: slow ones are mid-batch when 40 answers are in
            assert any(line.startswith("start") for line in log.read_text().splitlines())
            proc.send_signal(signal.SIGTERM)
            await load

        asyncio.run(main())
        code = proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
    starts = [line.split() for line in log.read_text().splitlines() if line.startswith("start")]
    scored = [line[2].split(":")[0] for line in starts]
    in_flight = [int(line[1]) for line in starts]
    # the limit holds, measured by the scorer itself; the load did reach it
    assert max(in_flight) == LIMIT, in_flight
    assert len(scored) == len(set(scored)), "a request was scored twice"
    # every request the service accepted (its batch started) got exactly one whole answer, and
    # a batch that started was answered 200 or 504, never cut off by the shutdown
    sent = {f"c{k}r{j}" for k in range(CLIENTS) for j in range(len(_fault_plan(k)))}
    assert set(outcomes) == sent
    for rid in scored:
        assert outcomes[rid][0] in (200, 504, "gone"), (rid, outcomes[rid])
    kinds = {o for o in outcomes.values()}
    assert kinds <= {(200, None), (504, "timeout"), (503, "overloaded"), ("gone", None),
                     ("transport", "ConnectError"), ("transport", "RemoteProtocolError"),
                     ("transport", "ReadError")}, kinds
    for k in range(CLIENTS):  # a slow batch is never a 200
        if _fault_plan(k)[0][0] == "slow":
            assert outcomes[f"c{k}r0"][0] in (504, 503, "transport"), outcomes[f"c{k}r0"]
    # a request refused by the closing service was never scored
    assert not {rid for rid, o in outcomes.items() if o[0] == "transport"} & set(scored)
    assert code in (0, -signal.SIGTERM)
    stopped = proc.stderr.read().decode()
    n = int(stopped.split("stopped after scoring ")[1].split()[0])
    answered = sum(o[0] == 200 for o in outcomes.values())
    assert answered <= n <= answered + sum(o[0] == "gone" for o in outcomes.values())
    if os.environ.get("THESISGYM_TEST_VERBOSE"):
        from collections import Counter
        print(Counter(outcomes.values()), len(scored), max(in_flight))
