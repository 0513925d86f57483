"""`thesisgym serve` on loopback: bad requests get a clear 4xx and the service keeps answering.

In-process tests use FastAPI's TestClient; the disconnect, oversized-body and shutdown tests run
the real `thesisgym serve` (uvicorn) in a subprocess on 127.0.0.1 and talk to it over sockets.
"""

from __future__ import annotations

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
from thesisgym.integrations.core import ground_truth_json, score_one
from thesisgym.integrations.serve import ServeConfig, create_app

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


@pytest.fixture
def server(dataset_dir):
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen(
        [sys.executable, "-c", "from thesisgym.cli import main; main()", "serve", "--dataset", str(dataset_dir), "--port", str(port),
         "--max-body-mb", "1", "--graceful", "20"],
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
