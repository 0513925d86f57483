"""`thesisgym audit`: every mutation family scores strictly below the honest thesis, on fresh data."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from thesisgym.cli import app
from thesisgym.evaluate.audit import FAMILIES, Doc, run_audit

os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
needs_real = pytest.mark.skipif(not (SHARED / "prices" / "AAPL.csv").exists(), reason="../shared/data not present")


def _save(store, tmp_path: Path, *, context=None) -> Path:
    from thesisgym.build.contexts import ContextConfig
    from thesisgym.build.splits import SplitConfig, build_splits

    cfg = SplitConfig(stride=3, token_budget=800, heldout_tickers=0, seed=0, context=context or ContextConfig())
    out = tmp_path / "ds"
    build_splits(store, cfg, out=out, show_progress=False)
    return out


@pytest.fixture(scope="module")
def synthetic_dataset(tmp_path_factory) -> Path:
    from thesisgym.build.contexts import ContextConfig
    from thesisgym.data import generate_market
    from thesisgym.data.synth import SynthConfig
    from thesisgym.experiments.demo import DEMO_CONTEXT

    store = generate_market(SynthConfig(n_tickers=3, n_days=200, seed=5, market="A"))
    return _save(store, tmp_path_factory.mktemp("audit"), context=ContextConfig(**DEMO_CONTEXT))


# Documented gaps, measured (see the README's audit section): family -> (largest win rate allowed, why).
# None today: opinion_flipped (1.0 % fsr / 1.4 % dsr of 294 real rows before) is at 0 % since the local
# judge reads the direction of indicator levels against the latest close.
REAL_DATA_GAPS: dict[str, tuple[float, str]] = {}


def _check(report: dict, min_rows: int, gaps: dict | None = None, *, min_family_rows: int | None = None) -> None:
    gaps = gaps or {}
    min_family_rows = min_rows // 3 if min_family_rows is None else min_family_rows
    assert report["rows"] >= min_rows and len(report["families"]) == len(FAMILIES) >= 25
    for fam in report["families"]:
        # every family applies to rows, and loses to the honest thesis on >= 99 % of them on each
        # column it is judged on (evidence unless it targets the decision/judge/loop; each recipe)
        assert fam["rows"] >= min_family_rows, fam
        judged = set(fam["judged_on"])
        assert set(fam["judged_on"]) >= {"fsr", "dsr"}
        assert ("evidence" in judged) == (fam["target"] == "evidence")
        bound = gaps.get(fam["family"], (0.01, ""))[0]
        for col in judged:
            assert fam["win"][col] is not None and fam["win"][col] <= bound, (fam["family"], col, fam["win"][col])
            assert fam["margin"][col] > 0, (fam["family"], col)
    assert set(report["failed"]) <= set(gaps)


def test_audit_cli_on_a_fresh_synthetic_dataset(synthetic_dataset, tmp_path):
    out = tmp_path / "audit.json"
    result = CliRunner().invoke(
        app, ["audit", str(synthetic_dataset), "--rows", "60", "--workers", "1", "--output", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert "quote_polarity" in result.output and "every family stays at or below 1%" in result.output
    report = json.loads(out.read_text())
    _check(report, 60)
    # the honest reference is what an honest thesis scores: grounded, nothing hallucinated
    assert report["honest_means"]["evidence"] > 0.8 and report["honest_means"]["structure"] > 0.85


def test_audit_exits_non_zero_when_a_family_wins(synthetic_dataset, monkeypatch):
    from thesisgym.evaluate import audit

    identity = audit.Family("identity", "the honest thesis itself", lambda doc, row, rng: doc.render())
    monkeypatch.setattr(audit, "FAMILIES", (*audit.FAMILIES, identity))
    result = CliRunner().invoke(
        app, ["audit", str(synthetic_dataset), "--rows", "5", "--workers", "1", "--families", "identity", "--json"]
    )
    assert result.exit_code == 1
    report = json.loads(result.output)
    assert report["failed"] == ["identity"] and report["families"][0]["win"]["evidence"] == 1.0


def test_audit_rejects_bad_input(synthetic_dataset, tmp_path):
    bad = CliRunner().invoke(app, ["audit", str(synthetic_dataset), "--families", "nope"])
    assert bad.exit_code == 2 and "unknown families ['nope']" in bad.output
    missing = CliRunner().invoke(app, ["audit", str(tmp_path / "none")])
    assert missing.exit_code == 2 and "no such dataset directory" in missing.output
    with pytest.raises(ValueError, match="row 0 has no 'evidence'"):
        run_audit([{"prompt": "x"}])


def test_honest_doc_roundtrip_is_exact(synthetic_dataset):
    import datasets

    from thesisgym.teachers import TemplateTeacher

    row = datasets.load_from_disk(str(synthetic_dataset))["train"][0]
    text = TemplateTeacher().write(row)[0]
    assert Doc.parse(text).render() == text


@needs_real
def test_audit_on_real_prices_and_headlines(tmp_path):
    import pandas as pd

    from thesisgym.data.importers import import_store

    prices = []
    for ticker in ("AAPL", "MSFT"):  # the years the headline file covers, so rows carry news
        df = pd.read_csv(SHARED / "prices" / f"{ticker}.csv")
        prices.append(tmp_path / f"{ticker}.csv")
        df[(df.Date >= "2018-10-01") & (df.Date <= "2021-12-31")].to_csv(prices[-1], index=False)
    store = import_store(
        prices=prices, events=[SHARED / "news" / "ticker_news_headlines_2019_2021.csv"], unknown_tickers="drop"
    )
    path = _save(store, tmp_path)
    result = CliRunner().invoke(app, ["audit", str(path), "--rows", "60", "--workers", "2", "--json"])
    report = json.loads(result.output)
    assert result.exit_code == (1 if report["failed"] else 0)
    # families that need two sections apply only on the days a headline is visible
    _check(report, 60, REAL_DATA_GAPS, min_family_rows=1)


# --- property: for random honest theses on random rows, each single mutation lowers the evidence -----
_PROPERTY_ROWS: list[dict] = []


def _property_rows() -> list[dict]:
    if not _PROPERTY_ROWS:
        from thesisgym.build import build_contexts
        from thesisgym.data import generate_market
        from thesisgym.data.synth import SynthConfig

        store = generate_market(SynthConfig(n_tickers=2, n_days=120, seed=11))
        _PROPERTY_ROWS.extend(build_contexts(store, show_progress=False))
    return _PROPERTY_ROWS


EVIDENCE_FAMILIES = [f for f in FAMILIES if f.target == "evidence"]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    row_i=st.integers(0, 10_000),
    teacher_seed=st.integers(0, 2**16),
    bullets=st.sampled_from([(1, 2), (2, 4), (4, 7)]),
    family=st.sampled_from(EVIDENCE_FAMILIES),
    mut_seed=st.integers(0, 2**16),
)
def test_every_single_mutation_lowers_the_evidence_reward(row_i, teacher_seed, bullets, family, mut_seed):
    import random

    from thesisgym.rewards import score_completion
    from thesisgym.rewards.base import strict_rewards
    from thesisgym.teachers import TemplateTeacher

    rows = _property_rows()
    row = rows[row_i % len(rows)]
    honest = TemplateTeacher(seed=teacher_seed, bullets=bullets).write(row)[0]
    hacked = family.mutate(Doc.parse(honest), row, random.Random(mut_seed))
    assume(hacked is not None)
    with strict_rewards():
        before = score_completion(honest, row)["evidence"]
        after = score_completion(hacked, row)["evidence"]
    assert after < before, (family.name, before, after)
