"""Synthetic market with known ground truth (docs/spec.md, section 9): `generate_market(SynthConfig(...))`.

Why: on real data nobody knows the true expected return, so one cannot tell a policy that reads the
evidence from one that memorised a lucky stock. Here the generator knows it, and an oracle policy's
Sharpe is the ceiling a trained policy is measured against.

Generative model (daily, business-day calendar, t = 0..n_days-1, log returns r):
- regime g_t in {bull, sideways, bear}: a Markov chain (stay with probability `regime_persistence`);
  the market return m_t = mu[g_t] + vol[g_t] * z_t.
- latent quality q_{i,t} per ticker: stationary AR(1) with unit variance, persistence `quality_persistence`.
- r_{i,t+1} = beta_i m_{t+1} + kappa q_{i,t-lag} + gamma M_{i,t} + lucky_{i,t+1} + e_{i,t+1} + sigma_i eps_{i,t+1}
  where e is the drift of recent events: each informative headline (size x %, stated) and earnings
  report (surprise s %) adds event_impact * (+-x or s) / 100 to the log return, spread evenly over the
  `impact_days` days after its publication day (`synth_events.event_impacts`); M is the mean of the last `momentum_window` returns and gamma = +momentum in market "A"
  (momentum pays) and -momentum in market "B" (it reverses, cancelling the momentum the persistent
  quality would otherwise create). The lucky ticker earns +lucky_drift per day before `train_end`
  (a fraction of n_days) and -lucky_drift after: memorising it in training loses out of sample.
- events read the state with noise (signal-to-noise `snr`): news headlines with numbers and sentiment
  (plus uninformative ones), quarterly fundamentals (EPS surprise %, revenue growth %), insider buys and
  sells, analyst rating changes with price targets, macro releases (CPI, policy rate; ticker "") that
  read the regime, and occasional prompt-injection headlines. Timestamps are UTC instants at realistic
  New York times: pre-market, intraday and after the 16:00 close, so the cutoff rule matters.
- truth: expected_return at (i, d) = E[close_{d+H}/close_d - 1 | state at d] with H = REWARD_HORIZON,
  computed from the model (regime transition probabilities, quality's AR(1) forecast, the momentum
  feedback of the expected path, the impacts of events published by d and the expected impacts of
  later ones, a lognormal variance term), never from realised future prices.

PRESETS name two settings of the knobs: "reading" (the default; the evidence predicts the label) and
"noisy" (events move nothing: the market as it was before the events had sizes, bit for bit).

Each random stream (regime, quality shocks, return shocks, each event attribute) has its own seeded
generator and is drawn day-major, so the first k days of a market do not depend on n_days: truncating
a market changes nothing before the cut (the leakage tests rely on this).
"""

from __future__ import annotations

import zlib
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd
import yaml
from pydantic import Field, model_validator

from thesisgym.data.store import MarketStore
from thesisgym.data.synth_events import company_names, event_impacts, fundamentals_draws, make_events
from thesisgym.schema import DEFAULT_TIMEZONE, REWARD_HORIZON, StrictModel

__all__ = ["PRESETS", "REGIMES", "SynthConfig", "generate_market"]

REGIMES: tuple[str, ...] = ("bull", "sideways", "bear")
_REGIME_DRIFT = np.array([0.0006, 0.0001, -0.0009])  # daily log market drift per regime
_REGIME_VOL = np.array([0.008, 0.010, 0.018])  # daily market volatility per regime
_REGIME_SCORE = np.array([1.0, 0.0, -1.0])  # what macro releases read, with noise


# Named settings of the knobs that decide how much reading the evidence pays (docs/spec.md, section 9).
# "reading" (the default): events of known size move the next week's returns over quieter idiosyncratic
# noise, so a prompt-only reader beats every constant decision. "noisy": the market before events
# moved prices, where the evidence barely predicts the weekly label and a constant decision is the
# best response to the decision rewards (the honest "mostly noise" setting).
PRESETS: dict[str, dict[str, object]] = {
    "reading": {"event_impact": 2.5, "impact_days": 7, "news_quality": 0.0, "idio_vol": 0.008, "events_per_day": 0.15,
                "noise_headline_share": 0.2, "insider_rate": 0.02, "analyst_rate": 0.03, "text_style": "terse"},
    "noisy": {"event_impact": 0.0, "impact_days": 7, "news_quality": 1.0, "idio_vol": 0.015, "events_per_day": 0.5,
              "noise_headline_share": 0.3, "insider_rate": 0.02, "analyst_rate": 0.03, "text_style": "detailed"},
}


class SynthConfig(StrictModel):
    """Knobs of the synthetic market; every field has a working default. Load from YAML with `from_yaml`.

    `preset` fills the knobs of PRESETS it names that are not given explicitly; `market="noisy"` is
    shorthand for market A with preset "noisy" (so `thesisgym data synth --market noisy` works)."""

    preset: Literal["reading", "noisy"] = Field("reading", description="named knob settings (PRESETS)")

    n_tickers: int = Field(20, ge=1, le=2000, description="number of tickers SYN000, SYN001, ...")
    n_days: int = Field(750, ge=40, le=20000, description="business days generated")
    start: str = Field("2020-01-02", description="first business day (ISO date)")
    seed: int = Field(0, ge=0, description="seed of every random stream")
    market: Literal["A", "B"] = Field("A", description="A: momentum pays; B: momentum reverses")
    snr: float = Field(1.0, gt=0, description="signal-to-noise of what events reveal about the latent state")
    quality_persistence: float = Field(0.98, ge=0, lt=1, description="AR(1) coefficient of daily quality")
    quality_drift: float = Field(0.0012, ge=0, description="daily log-return drift per unit of quality")
    lag: int = Field(3, ge=0, le=60, description="days before quality reaches returns (events lead prices)")
    idio_vol: float = Field(0.008, gt=0, description="mean daily idiosyncratic volatility")
    event_impact: float = Field(
        2.5, ge=0, description="log return an event moves its stock per percent of size it states, / 100"
    )
    impact_days: int = Field(7, ge=1, le=60, description="business days over which an event's impact is spread")
    text_style: Literal["terse", "detailed"] = Field(
        "terse", description="terse: a headline's first percentage is its size, earnings state the EPS surprise "
        "only; detailed: more numbers per item (revenue, margin, guidance, head counts)"
    )
    news_quality: float = Field(
        0.0, ge=0, description="weight of latent quality in what a headline reads (0: headlines are fresh shocks)"
    )
    momentum: float = Field(
        0.3, ge=0, lt=0.9, description="strength of the momentum term (sign set by market)"
    )
    momentum_window: int = Field(20, ge=REWARD_HORIZON, le=250, description="days in the momentum average")
    regimes: bool = Field(True, description="bull/sideways/bear Markov regimes (False: always sideways)")
    regime_persistence: float = Field(
        0.985, gt=0, lt=1, description="daily probability of keeping the regime"
    )
    events_per_day: float = Field(0.15, ge=0, description="expected news headlines per ticker per day")
    noise_headline_share: float = Field(0.2, ge=0, le=1, description="share of headlines carrying no signal")
    fundamentals_every: int = Field(63, ge=5, description="business days between earnings reports")
    insider_rate: float = Field(0.02, ge=0, le=1, description="insider filings per ticker per day")
    analyst_rate: float = Field(0.03, ge=0, le=1, description="analyst actions per ticker per day")
    macro: bool = Field(True, description="CPI releases every 21 and rate decisions every 30 business days")
    lucky: bool = Field(True, description="one ticker whose training-period drift reverses later")
    lucky_drift: float = Field(0.002, ge=0, description="the lucky ticker's extra daily drift (+ then -)")
    train_end: float = Field(
        0.6, gt=0, lt=1, description="fraction of n_days after which the lucky drift flips"
    )
    injection_rate: float = Field(
        0.001, ge=0, le=1, description="prompt-injection headlines per ticker per day"
    )

    @model_validator(mode="before")
    @classmethod
    def _preset(cls, data: object) -> object:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        if data.get("market") == "noisy":
            if data.get("preset", "noisy") != "noisy":
                raise ValueError(f"market 'noisy' is preset 'noisy', but preset={data['preset']!r} was given")
            data["market"], data["preset"] = "A", "noisy"
        preset = data.get("preset", "reading")
        if preset not in PRESETS:
            raise ValueError(f"preset: unknown {preset!r}; known: {sorted(PRESETS)}")
        for key, value in PRESETS[preset].items():
            data.setdefault(key, value)
        return data

    @model_validator(mode="after")
    def _check(self) -> SynthConfig:
        try:
            pd.Timestamp(self.start)
        except ValueError as exc:
            raise ValueError(f"start: not a date {self.start!r}") from exc
        if self.lag + 2 > self.n_days:
            raise ValueError(f"lag={self.lag} leaves no room in n_days={self.n_days}")
        return self

    @classmethod
    def from_yaml(cls, path: str | Path, **overrides: object) -> SynthConfig:
        """Read a YAML mapping of fields; `overrides` (e.g. from the CLI) win; None means not given."""
        path = Path(path)
        data = yaml.safe_load(path.read_text()) or {}
        if not isinstance(data, dict):
            raise ValueError(f"{path}: expected a mapping of SynthConfig fields, got {type(data).__name__}")
        data.update({k: v for k, v in overrides.items() if v is not None})
        try:
            return cls(**data)
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from exc


class _Streams:
    """One independent generator per named stream, so adding a draw somewhere never shifts another."""

    def __init__(self, seed: int):
        self.seed = seed

    def __call__(self, name: str) -> np.random.Generator:
        return np.random.default_rng(np.random.SeedSequence([self.seed, zlib.crc32(name.encode())]))


# --- the price model --------------------------------------------------------------------------------
def _transition(cfg: SynthConfig) -> np.ndarray:
    if not cfg.regimes:
        return np.eye(3)
    p = cfg.regime_persistence
    return np.full((3, 3), (1 - p) / 2) + np.eye(3) * (p - (1 - p) / 2)


def _simulate(cfg: SynthConfig, rs: _Streams) -> dict[str, np.ndarray]:
    T, N, L, W = cfg.n_days, cfg.n_tickers, cfg.lag, cfg.momentum_window
    P = _transition(cfg)
    # regime chain
    u = rs("regime").random(T)
    regime = np.empty(T, dtype=np.int64)
    cum = np.cumsum(P, axis=1)
    regime[0] = min(int(u[0] * 3), 2) if cfg.regimes else 1
    for t in range(1, T):
        regime[t] = int(np.searchsorted(cum[regime[t - 1]], u[t], side="right")) if cfg.regimes else 1
    regime = np.minimum(regime, 2)
    zm = rs("market").standard_normal(T)
    m = _REGIME_DRIFT[regime] + _REGIME_VOL[regime] * zm
    m[0] = 0.0

    # ticker constants
    tk = rs("tickers")
    beta = tk.uniform(0.7, 1.3, N)
    sigma = cfg.idio_vol * tk.uniform(0.7, 1.3, N)
    price0 = np.exp(tk.uniform(np.log(15), np.log(250), N))
    volume0 = np.exp(tk.uniform(np.log(2e5), np.log(2e7), N))
    lucky_idx = int(tk.integers(N)) if cfg.lucky else -1
    switch = int(round(cfg.train_end * T))

    # quality: qf[k] is the quality of day k - L (the first L rows are burn-in)
    eps = rs("quality").standard_normal((T + L, N))
    phi = cfg.quality_persistence
    qf = np.empty((T + L, N))
    qf[0] = eps[0]
    innov = np.sqrt(1 - phi**2)
    for k in range(1, T + L):
        qf[k] = phi * qf[k - 1] + innov * eps[k]

    # events of known size: each moves the next `impact_days` returns (never its own day's)
    impact = event_impacts(cfg, rs, qf[L:])
    fund_offset = fundamentals_draws(cfg, rs, qf[L:])["offset"]
    csum = np.vstack([np.zeros((1, N)), np.cumsum(impact, axis=0)])  # csum[k] = impact of days < k
    days = np.arange(T)
    drift = (csum[days] - csum[np.maximum(days - cfg.impact_days, 0)]) / cfg.impact_days

    gamma = cfg.momentum if cfg.market == "A" else -cfg.momentum
    lucky = np.zeros((T, N))
    if lucky_idx >= 0:
        lucky[:switch, lucky_idx] = cfg.lucky_drift
        lucky[switch:, lucky_idx] = -cfg.lucky_drift
    z = rs("returns").standard_normal((T, N))
    r = np.zeros((T, N))
    window = np.zeros(N)  # sum of the last W returns up to t-1
    for t in range(1, T):
        if t - 1 - W >= 0:
            window -= r[t - 1 - W]
        window += r[t - 1]
        r[t] = (beta * m[t] + cfg.quality_drift * qf[t - 1] + gamma * window / W + lucky[t] + drift[t]
                + sigma * z[t])
    return {
        "impact": impact,
        "fund_offset": fund_offset,
        "regime": regime,
        "m": m,
        "beta": beta,
        "sigma": sigma,
        "price0": price0,
        "volume0": volume0,
        "qf": qf,
        "r": r,
        "gamma": np.float64(gamma),
        "lucky_idx": np.int64(lucky_idx),
        "switch": np.int64(switch),
        "P": P,
    }


def _truth(cfg: SynthConfig, sim: dict[str, np.ndarray]) -> np.ndarray:
    """E[close_{d+H}/close_d - 1 | state at d] for every (d, i): uses only arrays indexed <= d."""
    T, N, L, W, H = cfg.n_days, cfg.n_tickers, cfg.lag, cfg.momentum_window, REWARD_HORIZON
    r, qf, beta, sigma, gamma = sim["r"], sim["qf"], sim["beta"], sim["sigma"], float(sim["gamma"])
    P, regime = sim["P"], sim["regime"]
    phi = cfg.quality_persistence
    csum = np.vstack([np.zeros((1, N)), np.cumsum(r, axis=0)])  # csum[k] = sum r[0..k-1]
    d = np.arange(T)
    mean_path = np.zeros((T, N))
    var_path = np.zeros((T, N))
    expected: list[np.ndarray] = []
    Ph = np.eye(3)
    for h in range(1, H + 1):
        Ph = Ph @ P
        m_mean = (Ph @ _REGIME_DRIFT)[regime]  # E[m_{d+h} | g_d]
        m_var = (Ph @ (_REGIME_VOL**2 + _REGIME_DRIFT**2))[regime] - m_mean**2
        k = h - 1 - L  # quality index relative to d
        q_part = qf[d + h - 1] if k <= 0 else phi**k * qf[d + L]
        lo = np.maximum(d + h - W, 0)
        realised = csum[d + 1] - csum[lo]  # r[d+h-W .. d]
        momentum = (realised + sum(expected)) / W if expected else realised / W
        lucky = np.zeros((T, N))
        if int(sim["lucky_idx"]) >= 0:
            lucky[:, int(sim["lucky_idx"])] = np.where(
                d + h < int(sim["switch"]), cfg.lucky_drift, -cfg.lucky_drift
            )
        e_h = (beta * m_mean[:, None] + cfg.quality_drift * q_part + gamma * momentum + lucky
               + _expected_drift(cfg, sim, h))
        expected.append(e_h)
        mean_path += e_h
        var_path += beta**2 * m_var[:, None] + sigma**2
    return np.expm1(mean_path + 0.5 * var_path)


def _expected_impact(cfg: SynthConfig, sim: dict[str, np.ndarray], k: int) -> np.ndarray:
    """(T, N): E[impact of the events of day d + k | state at d] for k >= 1. A headline's signed size
    is sign(R) (6 |R| + U(0.5, 2)) with R = q + noise / snr, so its mean given q ~ N(mu, v) is
    6 mu + 1.25 (2 Phi(mu / sqrt(1/snr^2 + v)) - 1); an earnings surprise is 4 R + noise, mean 4 mu,
    on the ticker's reporting days only."""
    from scipy.special import ndtr

    T, L, phi = cfg.n_days, cfg.lag, cfg.quality_persistence
    mu = phi**k * sim["qf"][L : L + T]  # the forecast of quality of day d + k (qf[d + L] is day d's)
    v = 1 - phi ** (2 * k)
    w = cfg.news_quality  # a headline reads w q + noise / snr
    news = cfg.events_per_day * (1 - cfg.noise_headline_share) * (
        6 * w * mu + 1.25 * (2 * ndtr(w * mu / np.sqrt(1 / cfg.snr**2 + w**2 * v)) - 1)
    )
    reports = ((np.arange(T)[:, None] + k + sim["fund_offset"][None, :]) % cfg.fundamentals_every) == 0
    return cfg.event_impact / 100 * (news + reports * 4 * mu)


def _expected_drift(cfg: SynthConfig, sim: dict[str, np.ndarray], h: int) -> np.ndarray:
    """(T, N): E[drift of r_{d+h} | state at d]: the known impacts of events published by d whose
    `impact_days` window covers d + h, plus the expected impacts of the days between (never d's later)."""
    T, D = cfg.n_days, cfg.impact_days
    if cfg.event_impact == 0:
        return np.zeros((T, sim["impact"].shape[1]))
    csum = np.vstack([np.zeros((1, sim["impact"].shape[1])), np.cumsum(sim["impact"], axis=0)])
    d = np.arange(T)
    lo = np.maximum(d + h - D, 0)
    known = (csum[d + 1] - csum[lo]) / D if h <= D else 0.0
    future = sum(_expected_impact(cfg, sim, k) for k in range(max(1, h - D), h)) / D
    return known + future


def _bars(
    cfg: SynthConfig, sim: dict[str, np.ndarray], rs: _Streams, dates: pd.DatetimeIndex
) -> pd.DataFrame:
    T, N = cfg.n_days, cfg.n_tickers
    r, sigma = sim["r"], sim["sigma"]
    close = sim["price0"] * np.exp(np.cumsum(r, axis=0))
    prev = np.vstack([close[:1], close[:-1]])
    zo, zh, zl, zv = (rs(f"bars-{x}").standard_normal((T, N)) for x in "ohlv")
    # the overnight gap carries part of the day's move; the open is known only at that day's close
    opn = prev * np.exp(0.3 * r + 0.2 * sigma * zo)
    high = np.maximum(opn, close) * np.exp(0.5 * sigma * np.abs(zh))
    low = np.minimum(opn, close) * np.exp(-0.5 * sigma * np.abs(zl))
    volume = np.round(sim["volume0"] * np.exp(0.25 * zv + 10 * np.abs(r - sim["beta"] * sim["m"][:, None])))
    tickers = _tickers(N)
    return pd.DataFrame(
        {
            "ticker": np.tile(np.array(tickers, dtype=object), T),
            "date": np.repeat(dates.to_numpy(), N),
            "open": opn.ravel(),
            "high": high.ravel(),
            "low": low.ravel(),
            "close": close.ravel(),
            "volume": volume.ravel(),
        }
    )


def _tickers(n: int) -> list[str]:
    return [f"SYN{i:03d}" for i in range(n)]


def generate_market(config: SynthConfig | None = None) -> MarketStore:
    """Generate bars, events and truth of one synthetic market (deterministic given the config)."""
    cfg = config if config is not None else SynthConfig()
    if not isinstance(cfg, SynthConfig):
        raise TypeError(f"config must be a SynthConfig, got {type(cfg).__name__}")
    rs = _Streams(cfg.seed)
    dates = pd.bdate_range(pd.Timestamp(cfg.start), periods=cfg.n_days)
    sim = _simulate(cfg, rs)
    tickers = _tickers(cfg.n_tickers)
    companies = company_names(tickers, rs("companies"))
    bars = _bars(cfg, sim, rs, dates)
    close = bars["close"].to_numpy().reshape(cfg.n_days, cfg.n_tickers)
    events = make_events(cfg, sim, rs, dates, tickers, companies, close)
    expected = _truth(cfg, sim)
    quality = sim["qf"][cfg.lag :]
    truth = pd.DataFrame(
        {
            "ticker": np.tile(np.array(tickers, dtype=object), cfg.n_days),
            "date": np.repeat(dates.to_numpy(), cfg.n_tickers),
            "expected_return": expected.ravel(),
            "quality": quality.ravel(),
            "regime": np.repeat(np.array(REGIMES, dtype=object)[sim["regime"]], cfg.n_tickers),
        }
    ).sort_values(["ticker", "date"], kind="stable", ignore_index=True)  # the order of the bars
    lucky_idx = int(sim["lucky_idx"])
    meta = {
        "market": cfg.market,
        "preset": cfg.preset,
        "generator": "thesisgym.data.synth",
        "config": cfg.model_dump(),
        "companies": companies,
        "lucky_ticker": tickers[lucky_idx] if lucky_idx >= 0 else None,
        "lucky_switch_date": str(dates[int(sim["switch"])].date())
        if lucky_idx >= 0 and int(sim["switch"]) < len(dates)
        else None,
        "momentum_gamma": float(sim["gamma"]),
        "betas": {t: float(b) for t, b in zip(tickers, sim["beta"], strict=False)},
        "injections": int((events["source"] == "message-board").sum()),
    }
    return MarketStore(
        bars=bars,
        events=events,
        truth=truth,
        name=f"synth-{cfg.market}-seed{cfg.seed}" if cfg.preset == "reading" else f"synth-{cfg.market}-{cfg.preset}-seed{cfg.seed}",
        timezone=DEFAULT_TIMEZONE,
        meta=meta,
    )
