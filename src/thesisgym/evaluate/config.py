"""`EvalConfig`: every setting of one evaluation, validated, with help on each field.

Why pydantic with extra="forbid" (like the training run configs): a typo in a YAML file
(`cost_pbs: 10`) must fail before an hour of generation, naming the key. The config holds only
settings (numbers, names, paths), so it round-trips through YAML and `metrics.json`; the things an
evaluation compares against (a train split for the majority class, a teacher's theses, a custom
scorer) are arguments of `evaluate`. The held-out-ticker run is the same `evaluate` call with
`config.for_heldout()`, so it can never drift from what the user asked for.

`sections` is the documented way for a caller to add its own material to the report: each
`ReportSection` has a title, a paragraph, an optional table (a list of row dicts) and PNG images,
and is rendered under "Training and extra material" (the demo passes its SFT-vs-GRPO change table
and learning curves this way).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from thesisgym.evaluate.metrics import DEFAULT_RF
from thesisgym.evaluate.probes import parse_probe_list
from thesisgym.evaluate.stats import DEFAULT_CONFIDENCE, DEFAULT_REPS, MIN_DATES
from thesisgym.schema import DEFAULT_POSITIONS, LABELS, REWARD_HORIZON, ArgumentError, StrictModel

# under this many trading days an annualised return is an extrapolation, not a measurement
MIN_ANNUALIZE_DAYS = 63


class ReportSection(StrictModel):
    """One extra section of the report: a title, a paragraph, a table and/or images."""

    title: str = Field(description="section heading")
    text: str = Field("", description="a paragraph under the heading (plain text)")
    table: list[dict[str, Any]] = Field(default_factory=list,
                                        description="rows of a table; the columns are the keys of the first row")
    images: list[Path] = Field(default_factory=list, description="PNG files embedded in the report")
    caption: str = Field("", description="how to read the table and images")

    @field_validator("images")
    @classmethod
    def _images_exist(cls, v: list[Path]) -> list[Path]:
        missing = [str(p) for p in v if not Path(p).is_file()]
        if missing:
            raise ValueError(f"no such image file: {', '.join(missing)}")
        return v


class EvalConfig(StrictModel):
    """Settings of one evaluation (see `thesisgym.evaluate.runner.evaluate`)."""

    out_dir: Path | None = Field(None, description="write report.html, PNGs, metrics.json, completions.jsonl "
                                                   "and scores.csv here (None: nothing is written)")
    max_rows: int | None = Field(None, ge=1, description="evaluate at most this many rows: whole consecutive "
                                                         "as-of dates (every ticker) from the start of the split")
    probes: list[str] = Field(default_factory=lambda: ["anon", "shift", "digits"],
                              description="probes to run (anon, shift, digits; inject: an instruction in the "
                                          "evidence, reports how often the policy obeys); [] for none")
    probe_rows: int | None = Field(None, ge=1, description="run the probes on at most this many of the "
                                   "backtest rows, spread evenly over them (a probe re-asks the policy for every "
                                   "row it covers); None = all")
    shift_years: int = Field(10, description="the shift probe moves every date by this many years")
    cost_bps: float = Field(5.0, ge=0, description="trading cost per unit of position change, in basis points")
    long_only: bool = Field(False, description="map short decisions to flat")
    horizon: int = Field(REWARD_HORIZON, ge=1, description="the label horizon the decisions were trained on "
                                                           "(trading days)")
    hold_days: int | None = Field(None, ge=1, description="close positions after this many trading days or at "
                                                          "the next decision (default: `horizon`)")
    positions: dict[str, float] = Field(default_factory=lambda: dict(DEFAULT_POSITIONS),
                                        description="position per decision, a fraction of capital (negative: short)")
    rf: float = Field(DEFAULT_RF, description="annual risk-free rate for Sharpe and Sortino")
    momentum_lookback: int = Field(20, ge=1, description="trailing days of the momentum baseline")
    seed: int = Field(0, description="seed of the random baseline, the probes and the bootstrap")
    noise_seed: int | None = Field(None, description="sampling seed of the resampling-noise run the probes are "
                                                     "read against (default: seed + 1)")
    judge: Literal["local", "llm", "none"] = Field("local", description="consistency judge for s: local, llm "
                                                                        "(OpenAI-compatible) or none")
    judge_model: str | None = Field(None, description="judge llm: model name")
    judge_base_url: str | None = Field(None, description="judge llm: OpenAI-compatible base URL")
    judge_options: dict[str, Any] = Field(default_factory=dict, description="judge llm: more LLMClient options "
                                                                            "(timeout, max_retries, cache_path)")
    chunk: int = Field(32, ge=1, description="rows handed to the policy per call")
    progress: bool = Field(True, description="show progress (a bar in a terminal, plain lines in a log)")
    max_error_rate: float = Field(0.02, ge=0, le=1, description="stop with an error when more than this share "
                                                                "of requests fail in transport")
    bootstrap_reps: int = Field(DEFAULT_REPS, ge=10, description="bootstrap resamples per interval")
    confidence: float = Field(DEFAULT_CONFIDENCE, gt=0, lt=1, description="confidence level of every interval")
    min_dates: int = Field(MIN_DATES, ge=1, description="under this many decision dates the report warns that "
                                                        "a figure is anecdote")
    min_annualize_days: int = Field(MIN_ANNUALIZE_DAYS, ge=1, description="annualised return is shown only for "
                                                                          "backtests at least this many days long")
    log_nav: bool = Field(False, description="NAV plot on a log scale")
    smoke: bool = Field(False, description="a smoke run (tiny sizes): the report opens with a banner saying its "
                                           "figures only show that the pipeline runs")
    title: str | None = Field(None, description="report title (default: the policy's name)")
    role: Literal["main", "heldout"] = Field("main", description="main: the split asked for; heldout: the "
                                                                 "held-out-ticker run for_heldout() makes (no "
                                                                 "probes; an accuracy reference that cannot "
                                                                 "answer its rows is left out with a warning)")
    sections: list[ReportSection] = Field(default_factory=list, description="extra report sections (e.g. the "
                                                                            "demo's SFT-vs-GRPO table and curves)")

    @field_validator("probes", mode="before")
    @classmethod
    def _probes(cls, v: Any) -> list[str]:
        return parse_probe_list(v)

    @field_validator("positions")
    @classmethod
    def _positions(cls, v: dict[str, float]) -> dict[str, float]:
        unknown = sorted(set(v) - set(LABELS))
        if unknown:
            raise ValueError(f"unknown decision(s) {unknown}; expected keys from {list(LABELS)}")
        missing = [lab for lab in LABELS if lab not in v]
        if missing:
            raise ValueError(f"no position for {missing}")
        return v

    @model_validator(mode="after")
    def _judge(self) -> EvalConfig:
        if self.judge == "llm" and not self.judge_model:
            raise ArgumentError("{arg} is needed with the llm judge", argument="judge_model")
        return self

    @property
    def hold(self) -> int:
        """The holding period in trading days."""
        return self.hold_days if self.hold_days is not None else self.horizon

    def for_heldout(self) -> EvalConfig:
        """The held-out-ticker run: the same settings, no probes, nothing written, no extra sections."""
        return self.model_copy(update={"probes": [], "out_dir": None, "sections": [], "role": "heldout"})

    def settings(self) -> dict[str, Any]:
        """The settings as JSON-ready values (what `metrics.json` and the report's settings table show)."""
        return self.model_dump(mode="json", exclude={"sections", "judge_options"})
