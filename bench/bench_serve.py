"""Load-test `thesisgym serve` on loopback: concurrent clients posting batches of completions.

Starts the real service (uvicorn, a subprocess on 127.0.0.1) over a dataset of synthetic context
rows (bench_rewards' generator: four sections, sixteen evidence items, numbers in every text),
then runs `--clients` asyncio clients, each posting `--batch` distinct ~400-word completions per
request (rows named by index, so the service's row cache is used) for `--duration` seconds, and a
shorter phase with the verifier records inline in the body. Prints requests/s, completions/s and
p50/p99 latency per phase, and, as the baseline measured in the same run, the same batches scored
in-process by `thesisgym.integrations.core.score_batch` (one thread, no HTTP): the ratio is what
the service layer costs. Client and server share this machine's cores, so on a small machine the
client's JSON encoding competes with the scoring it measures.

    python bench/bench_serve.py [--clients 64] [--batch 64] [--duration 30] [--recipe dsr]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import httpx  # noqa: E402
from bench_rewards import KINDS, completion, make_row  # noqa: E402

from thesisgym.integrations.core import score_batch, verifier_record  # noqa: E402


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _load(url: str, payloads: list[dict], clients: int, duration: float) -> dict:
    latencies: list[float] = []
    errors: dict[str, int] = {}
    done = 0
    next_payload = 0
    stop_at = time.perf_counter() + duration

    async def client(c: httpx.AsyncClient) -> None:
        nonlocal done, next_payload
        while time.perf_counter() < stop_at:
            body = payloads[next_payload % len(payloads)]
            next_payload += 1
            start = time.perf_counter()
            try:
                r = await c.post(url, json=body)
                ok = r.status_code == 200 and r.json()["n"] == len(body["items"])
                key = "ok" if ok else f"http {r.status_code}"
            except httpx.HTTPError as exc:
                key = type(exc).__name__
            if key == "ok":
                latencies.append(time.perf_counter() - start)
                done += len(body["items"])
            else:
                errors[key] = errors.get(key, 0) + 1

    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    t0 = time.perf_counter()
    async with httpx.AsyncClient(timeout=300, limits=limits) as c:
        await asyncio.gather(*(client(c) for _ in range(clients)))
    wall = time.perf_counter() - t0
    return {"wall": wall, "requests": len(latencies), "completions": done, "latencies": latencies,
            "errors": errors, "sent": next_payload}


def _report(name: str, res: dict, batch: int) -> None:
    lat = res["latencies"]
    if not lat:
        print(f"{name}: no successful request; errors {res['errors']}")
        return
    print(f"{name}: {res['requests']} requests in {res['wall']:.1f} s -> {res['requests'] / res['wall']:.2f} req/s, "
          f"{res['completions'] / res['wall']:.0f} completions/s; latency p50 {_percentile(lat, 0.5) * 1000:.0f} ms, "
          f"p99 {_percentile(lat, 0.99) * 1000:.0f} ms, mean {statistics.mean(lat) * 1000:.0f} ms; "
          f"errors {res['errors'] or 0}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--duration", type=float, default=30.0)
    parser.add_argument("--inline-duration", type=float, default=10.0)
    parser.add_argument("--rows", type=int, default=256)
    parser.add_argument("--pool", type=int, default=16384, help="distinct completions generated")
    parser.add_argument("--recipe", default="dsr")
    parser.add_argument("--concurrency", type=int, default=4, help="the service's --concurrency")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    import datasets

    rng = random.Random(args.seed)
    rows = []
    for _ in range(args.rows):
        row = make_row(rng)
        row.update(fwd_return=rng.gauss(0, 0.03), fwd_vol=0.035)
        rows.append(row)
    pool = []
    for k in range(args.pool):
        i = k % args.rows
        pool.append((i, completion(rng, rows[i], rng.choice(KINDS))))
    # the first `rows` completions warm the baseline's caches; the load phase starts after them
    batches = [pool[j:j + args.batch] for j in range(args.rows, len(pool) - args.batch + 1, args.batch)]
    by_index = [{"recipe": args.recipe, "items": [{"completion": c, "index": i} for i, c in b]} for b in batches]
    records = [verifier_record(r).model_dump(exclude_none=True) for r in rows]
    # the inline phase walks the pool from the other end, so it does not resend phase one's completions
    inline = [{"recipe": args.recipe, "items": [{"completion": c, "row": records[i]} for i, c in b]}
              for b in reversed(batches)]
    print(f"{args.rows} rows, {len(pool)} distinct completions "
          f"(mean {statistics.mean(len(c.split()) for _, c in pool):.0f} words), batches of {args.batch}, "
          f"recipe {args.recipe}, {os.cpu_count()} CPU cores shared by client and server")

    # baseline in the same run: the library in-process, one thread, no HTTP, on completions the
    # load phase never sends (no parse-cache hits), after one untimed pass that warms the per-row
    # evidence caches the service's long run also warms
    score_batch([c for _, c in pool[: args.rows]], [rows[i] for i, _ in pool[: args.rows]], args.recipe)
    fresh = [(k % args.rows, completion(rng, rows[k % args.rows], rng.choice(KINDS))) for k in range(8 * args.batch)]
    t0 = time.perf_counter()
    for j in range(0, len(fresh), args.batch):
        b = fresh[j:j + args.batch]
        score_batch([c for _, c in b], [rows[i] for i, _ in b], args.recipe)
    base_rate = len(fresh) / (time.perf_counter() - t0)
    print(f"in-process score_batch (baseline): {base_rate:.0f} completions/s ({len(fresh)} completions, "
          f"batches of {args.batch})")

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "ctx"
        datasets.DatasetDict({"train": datasets.Dataset.from_list(rows)}).save_to_disk(str(path))
        port = _free_port()
        server = subprocess.Popen(
            [sys.executable, "-c", "from thesisgym.cli import main; main()", "serve", "--dataset", str(path),
             "--port", str(port), "--recipe", args.recipe, "--max-batch", str(max(256, args.batch)),
             "--concurrency", str(args.concurrency), "--timeout", "300", "--max-body-mb", "64"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.time() + 120
            while True:
                try:
                    if httpx.get(url + "/readyz", timeout=1).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if server.poll() is not None or time.time() > deadline:
                    sys.exit(f"server did not start: {server.stderr.read().decode()[-2000:]}")
                time.sleep(0.2)
            res = asyncio.run(_load(url + "/score", by_index, args.clients, args.duration))
            _report(f"service, rows by index ({args.clients} clients x {args.batch})", res, args.batch)
            if res["sent"] > len(by_index):
                print(f"  note: {res['sent']} requests outlasted the pool of {len(by_index)} batches; "
                      "repeats hit the parse cache")
            if res["completions"]:
                print(f"  service / in-process: {res['completions'] / res['wall'] / base_rate:.2f}x")
            if args.inline_duration > 0:
                res2 = asyncio.run(_load(url + "/score", inline, args.clients, args.inline_duration))
                _report(f"service, rows inline ({args.clients} clients x {args.batch})", res2, args.batch)
                if res["sent"] + res2["sent"] > len(batches):
                    print("  note: the two phases overlapped in the pool; repeats hit the parse cache")
        finally:
            server.send_signal(signal.SIGTERM)
            try:
                server.wait(60)
            except subprocess.TimeoutExpired:
                server.kill()
            tail = server.stderr.read().decode().strip().splitlines()
            print(f"server: {tail[-1] if tail else '(no output)'}")


if __name__ == "__main__":
    main()
