"""Load-test `thesisgym serve` on loopback: throughput and latency below saturation, and what clients get at it.

Starts the real service (uvicorn, a subprocess on 127.0.0.1) over a dataset of synthetic context
rows (bench_rewards' generator: four sections, sixteen evidence items, numbers in every text) and
posts batches of `--batch` distinct ~400-word completions (rows named by index, so the service's
row cache is used). Phases, each printing requests/s, completions/s, p50/p99 latency of the
answered requests and every other status it saw:

1. `1 client`: one closed-loop client, nothing queues; its request rate is the capacity estimate
   (scoring is pure Python: the service's threads share one GIL, so one client nearly fills it).
2. `open loop at 50 % / 80 %`: Poisson arrivals at those fractions of that capacity, each request
   on its own: latency below saturation, queueing included.
3. `saturation`: `--clients` closed-loop clients (more than `--concurrency` + `--queue`): what the
   service does when it is full. Over the limit it answers 503 with Retry-After at once (counted,
   with the Retry-After values and how fast the refusal came); clients wait Retry-After and retry,
   as a well-behaved client would.
4. optionally (`--inline-duration`), the saturation load with the verifier records inline.

The baseline measured in the same run (before the phases and again after them) is batches of the
same kind scored in-process by `thesisgym.integrations.core.score_batch` (one thread, no HTTP): the
ratio is what the service layer costs. The phases draw distinct batches from one pool (repeats,
which hit the parse cache, are counted). Client and server share this machine's cores, so on a
small machine the client's JSON encoding competes with the scoring it measures; each line prints
the 1-minute load average it ran under.

    python bench/bench_serve.py [--clients 64] [--batch 64] [--duration 20] [--concurrency 4] [--queue 16]
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
from collections import Counter
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


class Tally:
    """What one phase saw: latencies of answered requests, other outcomes, Retry-After values."""

    def __init__(self) -> None:
        self.latencies: list[float] = []
        self.refusal_s: list[float] = []
        self.retry_after: Counter[str] = Counter()
        self.outcomes: Counter[str] = Counter()
        self.completions = 0
        self.sent = 0

    async def post(self, c: httpx.AsyncClient, url: str, body: dict) -> float:
        """One request; returns the seconds the server asked to wait (0 unless refused)."""
        self.sent += 1
        start = time.perf_counter()
        try:
            r = await c.post(url, json=body)
        except httpx.HTTPError as exc:
            self.outcomes[type(exc).__name__] += 1
            return 0.0
        took = time.perf_counter() - start
        if r.status_code == 200 and r.json()["n"] == len(body["items"]):
            self.latencies.append(took)
            self.completions += len(body["items"])
            self.outcomes["200"] += 1
            return 0.0
        kind = r.json().get("error", {}).get("type", "?") if r.headers.get("content-type") == "application/json" else "?"
        self.outcomes[f"{r.status_code} {kind}"] += 1
        if r.status_code == 503:
            self.refusal_s.append(took)
            self.retry_after[r.headers.get("retry-after", "none")] += 1
            return float(r.headers.get("retry-after", 1))
        return 0.0


class Payloads:
    """The request bodies, handed out in order across all phases (no phase resends another's
    batches, so none profits from the parse cache until the pool runs out, which is counted)."""

    def __init__(self, bodies: list[dict]) -> None:
        self.bodies, self.used = bodies, 0

    def next(self) -> dict:
        body = self.bodies[self.used % len(self.bodies)]
        self.used += 1
        return body


async def _closed_loop(url: str, payloads: Payloads, clients: int, duration: float) -> tuple[Tally, float]:
    tally, stop_at = Tally(), time.perf_counter() + duration

    async def client(c: httpx.AsyncClient) -> None:
        while time.perf_counter() < stop_at:
            body = payloads.next()
            wait = await tally.post(c, url, body)
            if wait:  # a well-behaved client honours Retry-After (not past the phase's end)
                await asyncio.sleep(min(wait, max(0.0, stop_at - time.perf_counter())))

    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    t0 = time.perf_counter()
    async with httpx.AsyncClient(timeout=300, limits=limits) as c:
        await asyncio.gather(*(client(c) for _ in range(clients)))
    return tally, time.perf_counter() - t0


async def _open_loop(url: str, payloads: Payloads, rate: float, duration: float, seed: int) -> tuple[Tally, float]:
    """Poisson arrivals at `rate` requests/s for `duration` s, each request independent of the others."""
    rng, tally, tasks = random.Random(seed), Tally(), []
    limits = httpx.Limits(max_connections=1000, max_keepalive_connections=200)
    t0 = time.perf_counter()
    async with httpx.AsyncClient(timeout=300, limits=limits) as c:
        at = 0.0
        while at < duration:
            await asyncio.sleep(max(0.0, t0 + at - time.perf_counter()))
            tasks.append(asyncio.create_task(tally.post(c, url, payloads.next())))
            at += rng.expovariate(rate)
        await asyncio.gather(*tasks)
    return tally, time.perf_counter() - t0


def _report(name: str, tally: Tally, wall: float) -> None:
    lat = tally.latencies
    others = {k: v for k, v in tally.outcomes.items() if k != "200"}
    line = f"{name} [load avg {os.getloadavg()[0]:.1f}]: {tally.sent} sent in {wall:.1f} s; "
    if lat:
        line += (f"{len(lat)} answered -> {len(lat) / wall:.2f} req/s, {tally.completions / wall:.0f} completions/s; "
                 f"latency p50 {_percentile(lat, 0.5) * 1000:.0f} ms, p99 {_percentile(lat, 0.99) * 1000:.0f} ms"
                 f"{' (= the max: under 100 answers)' if len(lat) < 100 else ''}, "
                 f"mean {statistics.mean(lat) * 1000:.0f} ms")
    else:
        line += "none answered"
    print(line + f"; other outcomes {others or 'none'}")
    if tally.refusal_s:
        print(f"  503 refusals: median {statistics.median(tally.refusal_s) * 1000:.1f} ms to arrive, "
              f"p99 {_percentile(tally.refusal_s, 0.99) * 1000:.1f} ms; Retry-After values {dict(tally.retry_after)}")


def _data(args: argparse.Namespace) -> tuple[list[dict], list[tuple[int, str]], list[dict], list[dict]]:
    rng = random.Random(args.seed)
    rows = []
    for _ in range(args.rows):
        row = make_row(rng)
        row.update(fwd_return=rng.gauss(0, 0.03), fwd_vol=0.035)
        rows.append(row)
    pool = [(k % args.rows, completion(rng, rows[k % args.rows], rng.choice(KINDS))) for k in range(args.pool)]
    # the first `rows` completions warm the baseline's caches; the load phases start after them
    batches = [pool[j:j + args.batch] for j in range(args.rows, len(pool) - args.batch + 1, args.batch)]
    by_index = [{"recipe": args.recipe, "items": [{"completion": c, "index": i} for i, c in b]} for b in batches]
    records = [verifier_record(r).model_dump(exclude_none=True) for r in rows]
    # the inline phase walks the pool from the other end
    inline = [{"recipe": args.recipe, "items": [{"completion": c, "row": records[i]} for i, c in b]}
              for b in reversed(batches)]
    return rows, pool, by_index, inline


def _baseline(args: argparse.Namespace, rows: list[dict], pool: list[tuple[int, str]], seed: int) -> float:
    """In-process score_batch, one thread, no HTTP, on completions no phase sends (no parse-cache
    hits), after one untimed pass that warms the per-row evidence caches the service also warms."""
    rng = random.Random(seed)
    score_batch([c for _, c in pool[: args.rows]], [rows[i] for i, _ in pool[: args.rows]], args.recipe)
    fresh = [(k % args.rows, completion(rng, rows[k % args.rows], rng.choice(KINDS))) for k in range(8 * args.batch)]
    t0 = time.perf_counter()
    for j in range(0, len(fresh), args.batch):
        b = fresh[j:j + args.batch]
        score_batch([c for _, c in b], [rows[i] for i, _ in b], args.recipe)
    rate = len(fresh) / (time.perf_counter() - t0)
    print(f"in-process score_batch (baseline) [load avg {os.getloadavg()[0]:.1f}]: {rate:.0f} completions/s ({len(fresh)} completions, "
          f"batches of {args.batch})")
    return rate


def _start(args: argparse.Namespace, path: Path) -> tuple[subprocess.Popen, str]:
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-c", "from thesisgym.cli import main; main()", "serve", "--dataset", str(path),
         "--port", str(port), "--recipe", args.recipe, "--max-batch", str(max(256, args.batch)),
         "--concurrency", str(args.concurrency), "--queue", str(args.queue), "--timeout", str(args.timeout),
         "--max-body-mb", "64"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 120
    while True:
        try:
            if httpx.get(url + "/readyz", timeout=1).status_code == 200:
                return server, url
        except httpx.TransportError:
            pass
        if server.poll() is not None or time.time() > deadline:
            sys.exit(f"server did not start: {server.stderr.read().decode()[-2000:]}")
        time.sleep(0.2)


def _phases(args: argparse.Namespace, url: str, by_index: Payloads, inline: Payloads, base_rate: float) -> None:
    url += "/score"
    n = args.batch
    tally, wall = asyncio.run(_closed_loop(url, by_index, 1, args.duration))
    _report(f"1 client x {n}", tally, wall)
    capacity = len(tally.latencies) / wall
    print(f"  service / in-process (1 client): {tally.completions / wall / base_rate:.2f}x")
    for share in (0.5, 0.8):
        tally, wall = asyncio.run(_open_loop(url, by_index, share * capacity, args.duration, args.seed))
        _report(f"open loop at {share:.0%} of that rate ({share * capacity:.2f} req/s, Poisson) x {n}", tally, wall)
    tally, wall = asyncio.run(_closed_loop(url, by_index, args.clients, args.duration))
    _report(f"saturation: {args.clients} clients x {n} (concurrency {args.concurrency}, queue {args.queue})",
            tally, wall)
    if tally.completions:
        print(f"  service / in-process (saturated): {tally.completions / wall / base_rate:.2f}x")
    if args.inline_duration > 0:
        tally, wall = asyncio.run(_closed_loop(url, inline, args.clients, args.inline_duration))
        _report(f"saturation, rows inline: {args.clients} clients x {n}", tally, wall)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--duration", type=float, default=20.0, help="seconds per phase")
    parser.add_argument("--inline-duration", type=float, default=0.0)
    parser.add_argument("--rows", type=int, default=256)
    parser.add_argument("--pool", type=int, default=16384, help="distinct completions generated")
    parser.add_argument("--recipe", default="dsr")
    parser.add_argument("--concurrency", type=int, default=4, help="the service's --concurrency")
    parser.add_argument("--queue", type=int, default=16, help="the service's --queue")
    parser.add_argument("--timeout", type=float, default=300.0, help="the service's --timeout")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    import datasets

    rows, pool, by_index, inline = _data(args)
    print(f"{args.rows} rows, {len(pool)} distinct completions "
          f"(mean {statistics.mean(len(c.split()) for _, c in pool):.0f} words), batches of {args.batch}, "
          f"recipe {args.recipe}, {os.cpu_count()} CPU cores shared by client and server")
    base_rate = _baseline(args, rows, pool, args.seed + 1)
    payloads = Payloads(by_index)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "ctx"
        datasets.DatasetDict({"train": datasets.Dataset.from_list(rows)}).save_to_disk(str(path))
        server, url = _start(args, path)
        try:
            _phases(args, url, payloads, Payloads(inline), base_rate)
        finally:
            server.send_signal(signal.SIGTERM)
            try:
                server.wait(60)
            except subprocess.TimeoutExpired:
                server.kill()
            tail = server.stderr.read().decode().strip().splitlines()
            print(f"server: {tail[-1] if tail else '(no output)'}")
    repeats = max(0, payloads.used - len(by_index))
    print(f"{payloads.used} batches sent by index, {len(by_index)} distinct: {repeats} repeats (parse-cache hits)")
    # the baseline again: the machine's load drifts over a run, and both ends bound the ratio's noise
    _baseline(args, rows, pool, args.seed + 2)  # fresh completions again, not the first baseline's


if __name__ == "__main__":
    main()
